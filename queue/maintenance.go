package queue

import (
	"context"
	"log/slog"
	"time"
)

// maintainer runs ExpireOverdue and Reclaim for one run of a worker: once
// at start and then every interval (jittered), until its context ends. It
// owns nothing of the run and touches only the table, through those two
// public operations; it does not see the run's attempts.
type maintainer struct {
	q        *Queue
	log      *slog.Logger
	interval time.Duration
}

// run maintains the table until ctx ends.
func (m *maintainer) run(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
		// ExpireOverdue and Reclaim log what they changed themselves.
		if _, err := m.q.ExpireOverdue(cctx); err != nil && ctx.Err() == nil {
			m.log.Warn("expiring overdue jobs failed", "err", err)
		}
		if _, err := m.q.Reclaim(cctx); err != nil && ctx.Err() == nil {
			m.log.Warn("reclaiming abandoned attempts failed", "err", err)
		}
		cancel()
		t := time.NewTimer(jitter(m.interval))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
