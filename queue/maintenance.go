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
	// failures follows each operation's runs of failures (by its
	// description), so that a failure repeated pass after pass is logged
	// as a warning once, not at every pass. Only run's goroutine uses it.
	failures failureStreaks
}

// run maintains the table while this worker leads, until ctx ends.
func (m *maintainer) run(ctx context.Context) {
	for {
		changed := m.el.changes()
		f, term, leading := m.el.fence()
		if !leading {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		m.pass(ctx, term, f)
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
// with the leadership's term, each batch and round an act fenced by f.
func (m *maintainer) pass(ctx, term context.Context, f *termFence) {
	cctx, cancel := context.WithCancel(term)
	defer cancel()
	cctx = withFence(cctx, m.el.guard) // each statement checks the lead right before it is sent
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	start := time.Now()
	var expired, reclaimed, pruned int64
	refused := false
	// failed logs an operation's error, if any: a warning for the first
	// of a run of failures, then at debug level until it works again.
	failed := func(what string, err error) {
		switch {
		case err == nil:
			if n, _ := m.failures.of(what).succeeded(); n > 0 {
				m.log.Info(what+" works again", "op", what)
			}
		case errors.Is(err, errTermEnded):
			refused = true
			m.log.Warn("maintenance refused by the database: this worker's term has ended there; nothing was changed, the worker steps down",
				"op", what, "term", f.term, "holder", f.holder)
			m.el.stepDown(f.term)
		case cctx.Err() == nil && !errors.Is(err, errNotLeading):
			if m.failures.of(what).failed() {
				m.log.Warn(what+" failed; trying again at each pass (logged again at debug level until it works)", "err", err, "retry_in", m.interval)
			} else {
				m.log.Debug(what+" failed again", "err", err)
			}
		}
	}
	// The operations log what they changed themselves.
	var err error
	if m.el.guard() == nil {
		expired, err = m.q.expireOverdue(cctx, f)
		failed("expiring overdue jobs", err)
	}
	if !refused && m.el.guard() == nil {
		reclaimed, err = m.q.reclaim(cctx, f)
		failed("reclaiming abandoned attempts", err)
	}
	if !refused && m.retention > 0 && m.el.guard() == nil {
		pruned, err = m.q.prune(cctx, m.retention, f)
		failed("pruning finished jobs", err)
	}
	if refused || m.el.guard() != nil {
		// Every act that changed something committed while this worker
		// led in its term; the pass stopped when the leadership ended.
		m.log.Debug("maintenance pass cut short: the leadership ended", "expired", expired, "reclaimed", reclaimed, "pruned", pruned, "took", time.Since(start))
		return
	}
	m.log.Debug("maintenance pass done", "expired", expired, "reclaimed", reclaimed, "pruned", pruned, "took", time.Since(start))
}
