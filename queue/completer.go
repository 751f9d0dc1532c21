package queue

import (
	"context"
	"log/slog"
	"time"
)

// Tuning of the completer's batches.
const (
	// completeBatch is the most attempts one complete statement finishes.
	completeBatch = 500
	// completeLinger is how long the first finished attempt of a batch
	// waits for others before the batch is written; while a batch is being
	// written, the next one gathers.
	completeLinger = 2 * time.Millisecond
)

// completion is an attempt whose handler succeeded, waiting to be written.
type completion struct {
	a   *attempt
	dur time.Duration
}

// completer writes the succeeded attempts of one run in batches (fenced by
// their claim tokens) and emits their EventCompleted. It owns the
// completions from the moment an executor hands one over (add) until it is
// written or given up; it touches nothing else of the run.
type completer struct {
	q     *Queue
	log   *slog.Logger
	dbCtx context.Context // the worker's statements (see run.dbCtx)
	in    chan completion
}

// add hands over a succeeded attempt.
func (c *completer) add(done completion) {
	c.in <- done
}

// run waits for the first succeeded attempt, gathers more for up to
// completeLinger (or until completeBatch), and writes them in one
// statement; finished attempts gather while it writes. When stop is closed
// it writes what has arrived and returns.
func (c *completer) run(stop <-chan struct{}) {
	batch := make([]completion, 0, completeBatch)
	for {
		batch = batch[:0]
		select {
		case done := <-c.in:
			batch = append(batch, done)
		case <-stop:
			for {
				select {
				case done := <-c.in:
					batch = append(batch, done)
					if len(batch) == completeBatch {
						c.write(batch)
						batch = batch[:0]
					}
				default:
					if len(batch) > 0 {
						c.write(batch)
					}
					return
				}
			}
		}
		linger := time.NewTimer(completeLinger)
	gather:
		for len(batch) < completeBatch {
			select {
			case done := <-c.in:
				batch = append(batch, done)
			case <-linger.C:
				break gather
			}
		}
		linger.Stop()
		c.write(batch)
	}
}

// write completes one batch, trying a few times when the database fails;
// attempts it cannot write stay in_progress until Reclaim.
func (c *completer) write(batch []completion) {
	refs := make([]AttemptRef, len(batch))
	for i, done := range batch {
		refs[i] = done.a.ref
	}
	var stale []AttemptRef
	var err error
	for try, wait := 0, 50*time.Millisecond; try < 4; try, wait = try+1, wait*4 {
		if try > 0 {
			time.Sleep(wait)
		}
		ctx, cancel := context.WithTimeout(c.dbCtx, dbCallTimeout)
		stale, err = c.q.complete(ctx, refs)
		cancel()
		if err == nil {
			break
		}
		c.log.Warn("completing jobs failed; trying again", "jobs", len(refs), "err", err)
	}
	if err != nil {
		c.log.Error("completing jobs failed; they stay in_progress until Reclaim runs them again", "jobs", len(refs), "err", err)
		return
	}
	lost := make(map[AttemptRef]bool, len(stale))
	for _, s := range stale {
		lost[s] = true
	}
	now := c.q.now()
	for _, done := range batch {
		row := done.a.row
		if lost[done.a.ref] {
			c.log.Warn("job finished but its attempt had lost the job (lease passed and it was reclaimed, retried or deleted); completion refused",
				"job_id", row.ID, "kind", row.Name)
			continue
		}
		ev := *row
		ev.Status, ev.ClaimToken, ev.LeaseUntil, ev.FinishedAt = StatusCompleted, "", nil, &now
		c.log.Debug("job completed", "job_id", row.ID, "kind", row.Name, "duration", done.dur)
		c.q.emit(Event{Kind: EventCompleted, Job: &ev, Duration: done.dur})
	}
}
