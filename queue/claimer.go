package queue

import (
	"context"
	"log/slog"
	"time"
)

// claimGather is how long the claimer waits, while work remains, for every
// slot to be free before it claims for fewer: short next to a claim's round
// trip, long enough for handlers that just finished.
const claimGather = 500 * time.Microsecond

// claimer is the goroutine of Run: it claims jobs into the run's free slots
// and hands them to the executors. It owns the count of free slots, the
// poll timer and the wake-ups; it adds every attempt it claims to the
// inflightSet before handing it out, reads how full the completer is
// (and claims nothing while it is full), and writes nothing but claims.
type claimer struct {
	q     *Queue
	cfg   WorkerConfig
	log   *slog.Logger
	dbCtx context.Context // the worker's statements (see run.dbCtx)
	jobs  context.Context // parent of the handlers' contexts

	attempts  *inflightSet
	completer *completer
	work      chan<- *attempt // to the executors; room for every slot
	freed     <-chan struct{} // from the executors: a slot is free
}

// loop claims jobs into the free slots until stop ends or MaxJobs jobs were
// claimed, and returns how many it claimed. After a full batch it claims
// again as soon as a slot is free; after a short one (nothing more was due)
// it waits for the poll timer or a wake-up.
func (c *claimer) loop(stop context.Context) int {
	free := c.cfg.Concurrency
	claimed := 0
	var wakeups <-chan struct{}
	if c.cfg.Waker != nil {
		wakeups = c.cfg.Waker.Wakeups()
	}
	errDelay := time.Duration(0)
	for {
		// Take back the slots freed meanwhile.
	drain:
		for {
			select {
			case <-c.freed:
				free++
			default:
				break drain
			}
		}
		if stop.Err() != nil {
			return claimed
		}
		if c.cfg.MaxJobs > 0 && claimed >= c.cfg.MaxJobs {
			c.log.Info("worker claimed MaxJobs jobs; finishing them", "max_jobs", c.cfg.MaxJobs)
			return claimed
		}
		if free == 0 {
			select {
			case <-c.freed:
				free++
				continue
			case <-stop.Done():
				return claimed
			}
		}
		if c.completer.full() {
			// The completer holds more results than it could write yet
			// (the database is slow or failing): claim no more until it
			// catches up, so that its backlog stays bounded.
			select {
			case <-c.completer.drained:
			case <-c.freed:
				free++
			case <-stop.Done():
				return claimed
			}
			continue
		}
		// One claim takes at most maxClaim jobs: ask for no more, so that a
		// full claim is told from a short one (nothing more due).
		n := min(free, maxClaim)
		if c.cfg.MaxJobs > 0 {
			n = min(n, c.cfg.MaxJobs-claimed)
		}
		if free < c.cfg.Concurrency && n == free {
			// Work remains but some slots are busy: give the running
			// handlers a moment to free more, so that one claim fills
			// several slots rather than one claim per slot.
			free = c.gatherSlots(free, c.cfg.Concurrency, stop)
			n = min(free, maxClaim)
			if c.cfg.MaxJobs > 0 {
				n = min(n, c.cfg.MaxJobs-claimed)
			}
		}
		// Take the wake channel before claiming, so that an enqueue that
		// lands while the claim runs wakes the idle wait below.
		woken := c.q.wake.wait()
		rows, err := c.claim(n)
		var idle time.Duration
		switch {
		case err != nil:
			errDelay = min(max(2*errDelay, 100*time.Millisecond), max(c.cfg.PollInterval, 5*time.Second))
			c.log.Error("claiming jobs failed; trying again", "err", err, "retry_in", errDelay)
			idle, woken = errDelay, nil
		case len(rows) < n:
			errDelay = 0
			idle = jitter(c.cfg.PollInterval)
		default:
			errDelay = 0
		}
		for _, row := range rows {
			c.dispatch(row)
		}
		claimed += len(rows)
		free -= len(rows)
		if idle == 0 {
			continue // a full batch: more may be due at once
		}
		// Idle: wait for the poll timer, a wake-up or the end, counting the
		// slots that free up meanwhile.
		timer := time.NewTimer(idle)
	wait:
		for {
			select {
			case <-stop.Done():
				timer.Stop()
				return claimed
			case <-timer.C:
				break wait
			case <-woken:
				timer.Stop()
				break wait
			case _, ok := <-wakeups:
				if !ok {
					wakeups = nil
					continue
				}
				timer.Stop()
				break wait
			case <-c.freed:
				free++
			}
		}
	}
}

// gatherSlots waits up to claimGather for free to reach want, counting the
// slots that free up, and returns the number free.
func (c *claimer) gatherSlots(free, want int, stop context.Context) int {
	timer := time.NewTimer(claimGather)
	defer timer.Stop()
	for free < want {
		select {
		case <-c.freed:
			free++
		case <-timer.C:
			return free
		case <-stop.Done():
			return free
		}
	}
	return free
}

// claim runs one claim of up to n jobs. It is not cancelled by the worker's
// stop: a claim cut off half-way could leave claimed rows nobody runs.
func (c *claimer) claim(n int) ([]*JobRow, error) {
	ctx, cancel := context.WithTimeout(c.dbCtx, dbCallTimeout)
	defer cancel()
	return c.q.claim(ctx, c.cfg.Types, n, c.cfg.Lease)
}

// dispatch registers a claimed row as in flight and hands it to an executor
// (the channel has room for every slot, so this never blocks).
func (c *claimer) dispatch(row *JobRow) {
	ctx, cancel := context.WithCancelCause(c.jobs)
	a := &attempt{row: row, ref: attemptRef{ID: row.ID, Token: row.ClaimToken}, ctx: ctx, cancel: cancel}
	if row.LeaseUntil != nil {
		a.leaseEnd = *row.LeaseUntil
	} else {
		a.leaseEnd = c.q.now().Add(c.cfg.Lease)
	}
	c.attempts.add(a)
	c.log.Debug("job claimed", "job_id", row.ID, "kind", row.Name, "type", row.Type, "attempt", row.Attempts)
	c.q.emit(Event{Kind: EventClaimed, Job: row})
	c.work <- a
}
