package queue

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// maintainer runs the table's maintenance while its worker leads (see
// leader.go): ExpireOverdue, Reclaim and, with a retention, Prune, at once
// when the worker gains the leadership and then every interval. Every
// statement is bounded (they work in batches) and sent only while the
// worker still leads, under a context that ends with the leadership. It
// owns nothing of the run and touches only the table, through those
// operations; it does not see the run's attempts.
type maintainer struct {
	q         *Queue
	log       *slog.Logger
	el        *elector
	interval  time.Duration
	retention time.Duration // 0: no Prune
}

// run maintains the table while this worker leads, until ctx ends.
func (m *maintainer) run(ctx context.Context) {
	for {
		changed := m.el.changes()
		term, leading := m.el.term()
		if !leading {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		m.pass(ctx, term)
		t := time.NewTimer(m.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-changed: // lost (or, after a loss not yet seen, gained again)
			t.Stop()
		case <-t.C:
		}
	}
}

// pass runs the maintenance once, under a context that ends with ctx or
// with the leadership's term.
func (m *maintainer) pass(ctx, term context.Context) {
	cctx, cancel := context.WithCancel(term)
	defer cancel()
	cctx = withFence(cctx, m.el.guard) // each statement checks the lead right before it is sent
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	start := time.Now()
	var expired, reclaimed, pruned int64
	var err error
	// The operations log what they changed themselves.
	if m.el.guard() == nil {
		if expired, err = m.q.expireOverdue(cctx, m.el.guard); err != nil && cctx.Err() == nil && !errors.Is(err, errNotLeading) {
			m.log.Warn("expiring overdue jobs failed", "err", err)
		}
	}
	if m.el.guard() == nil {
		if reclaimed, err = m.q.Reclaim(cctx); err != nil && cctx.Err() == nil && !errors.Is(err, errNotLeading) {
			m.log.Warn("reclaiming abandoned attempts failed", "err", err)
		}
	}
	if m.retention > 0 && m.el.guard() == nil {
		if pruned, err = m.q.prune(cctx, m.retention, m.el.guard); err != nil && cctx.Err() == nil && !errors.Is(err, errNotLeading) {
			m.log.Warn("pruning finished jobs failed", "err", err)
		}
	}
	if m.el.guard() != nil {
		// The statements were all sent while this worker led; the pass
		// stopped when the leadership ran out.
		m.log.Debug("maintenance pass cut short: the leadership ended", "expired", expired, "reclaimed", reclaimed, "pruned", pruned, "took", time.Since(start))
		return
	}
	m.log.Debug("maintenance pass done", "expired", expired, "reclaimed", reclaimed, "pruned", pruned, "took", time.Since(start))
}
