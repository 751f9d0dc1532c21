package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// abandonGrace is how long Run waits for handlers after cancelling their
// contexts at shutdown before it returns without them.
const abandonGrace = 5 * time.Second

// errShutdown is the cause of a handler's context that the worker cancelled
// because it stopped and ShutdownTimeout passed.
var errShutdown = fmt.Errorf("%w (ShutdownTimeout passed)", ErrWorkerShutdown)

// errStopNow is the cause of a handler's context that the worker cancelled
// because Worker.StopNow was called. The attempt is settled as one that
// ShutdownTimeout cut off (cutOffByShutdown).
var errStopNow = fmt.Errorf("%w (Worker.StopNow: no grace)", ErrWorkerShutdown)

// cutOffByShutdown reports whether cause, an attempt's context's, is the
// shutdown's cancellation (errShutdown or errStopNow). Only the worker sets
// these causes: a handler's error does not count.
func cutOffByShutdown(cause error) bool { return errors.Is(cause, ErrWorkerShutdown) }

// The end of a run. Once the claimer has stopped, awaitExecutors lets the
// running handlers finish (all the time they need when MaxJobs ended the
// run; ShutdownTimeout once ctx ended or MaxRuntime passed; none once
// StopNow was called), then cancels their contexts with errShutdown (or
// errStopNow), and gives up on them abandonGrace later.
// The executors put the attempts whose handlers then returned an error on
// the releaseList, and releaseInterrupted releases them in one batch. The
// shutdown owns the releaseList and the handlers' parent context; it reads
// the inflightSet only to count.

// releaseList collects the attempts cut off by shutdown (their handlers
// returned an error after errShutdown, or never started), to release in one
// batch (those that never started are given back: unclaim).
type releaseList struct {
	mu    sync.Mutex
	items []releasedAttempt
}

// releasedAttempt is an attempt on the releaseList: its job as claimed,
// whether its handler started, and how long it ran.
type releasedAttempt struct {
	row     *JobRow
	started bool
	dur     time.Duration
}

// add puts an attempt on the list.
func (l *releaseList) add(row *JobRow, started bool, dur time.Duration) {
	l.mu.Lock()
	l.items = append(l.items, releasedAttempt{row: row, started: started, dur: dur})
	l.mu.Unlock()
}

// take empties the list and returns what it held.
func (l *releaseList) take() []releasedAttempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	items := l.items
	l.items = nil
	return items
}

// awaitExecutors waits for the executors (whose work channel is closed) to
// return: as long as they need until stop ends, then ShutdownTimeout (none
// once r.stoppedNow ended: StopNow), then it cancels the handlers' contexts and
// waits r.abandon more. It returns an error when handlers ignored the
// cancellation (they are left running).
func (r *run) awaitExecutors(stop context.Context, execs *sync.WaitGroup) error {
	execsDone := make(chan struct{})
	go func() { execs.Wait(); close(execsDone) }()
	var grace, abandon <-chan time.Time
	stopped := stop.Done()
	var stoppedNow <-chan struct{}
	if r.stoppedNow != nil {
		stoppedNow = r.stoppedNow.Done()
	}
	// cut cancels the handlers' contexts with cause, once.
	cut := func(cause error) {
		grace, stopped, stoppedNow = nil, nil, nil
		r.shutdownCause = cause
		r.cancelJobs(cause)
		abandon = time.After(r.abandon)
	}
	for {
		select {
		case <-execsDone:
			return nil
		case <-stoppedNow:
			if n := r.attempts.len(); n > 0 {
				r.log.Warn("worker stopping at once (StopNow): cancelling running handlers", "running", n)
			}
			cut(errStopNow)
		case <-stopped:
			stopped = nil
			if stoppedNow != nil && r.stoppedNow.Err() != nil {
				continue // StopNow stopped the run: no grace (case <-now)
			}
			if r.cfg.ShutdownTimeout < 0 {
				grace = closedTimeChan()
			} else {
				grace = time.After(r.cfg.ShutdownTimeout)
			}
			if n := r.attempts.len(); n > 0 {
				r.log.Info("worker stopping: waiting for running handlers", "running", n, "timeout", max(r.cfg.ShutdownTimeout, 0))
			}
		case <-grace:
			grace = nil
			if n := r.attempts.len(); n > 0 {
				r.log.Warn("shutdown timeout passed: cancelling running handlers", "running", n)
			}
			cut(errShutdown)
		case <-abandon:
			n := r.attempts.len()
			r.log.Error("handlers ignore their cancelled contexts; leaving them", "running", n)
			return fmt.Errorf("jobqueue: worker stopped with %d handler(s) still running %v after their contexts were cancelled; their jobs stay in_progress until Reclaim (make handlers return when their context ends)", n, r.abandon)
		}
	}
}

// releaseInterrupted releases, in one batch, the attempts whose handlers
// returned an error after the shutdown cancelled them, and gives back
// those that never started (unclaim: their jobs pending as before their
// claim, the attempt not counted), and emits an EventFailed with the
// outcome of each one.
func (r *run) releaseInterrupted() {
	items := r.released.take()
	if len(items) == 0 {
		return
	}
	var started, unstarted []attemptRef
	for _, it := range items {
		if it.started {
			started = append(started, it.row.ref())
		} else {
			unstarted = append(unstarted, it.row.ref())
		}
	}
	ctx, cancel := context.WithTimeout(r.dbCtx, dbCallTimeout)
	defer cancel()
	// The outcome of each attempt: its end (released), given back, or
	// neither (stale); unknown, and left to Reclaim, when its write failed.
	cause := r.shutdownCause
	if cause == nil {
		cause = errShutdown
	}
	var ends map[attemptRef]attemptEnd
	givenBack := map[attemptRef]bool{}
	startedFailed, unstartedFailed := false, false
	if len(started) > 0 {
		var stale []attemptRef
		var err error
		stale, ends, err = r.q.releaseEnds(ctx, started)
		if err != nil {
			startedFailed = true
			r.log.Error("releasing interrupted attempts failed; their jobs stay in_progress until Reclaim", "jobs", len(started), "err", err)
		} else {
			r.log.Info("released interrupted attempts", "jobs", len(ends), "stale", len(stale))
		}
	}
	if len(unstarted) > 0 {
		stale, err := r.q.unclaim(ctx, unstarted)
		if err != nil {
			unstartedFailed = true
			r.log.Error("giving back claimed jobs not started failed; they stay in_progress until Reclaim", "jobs", len(unstarted), "err", err)
		} else {
			for _, ref := range unstarted {
				givenBack[ref] = true
			}
			for _, ref := range stale {
				delete(givenBack, ref)
			}
		}
	}
	if !r.q.listening() {
		return
	}
	for _, it := range items {
		if (it.started && startedFailed) || (!it.started && unstartedFailed) {
			continue
		}
		ref := it.row.ref()
		if givenBack[ref] {
			r.q.emitGivenBack(it.row, cause)
			continue
		}
		ev := *it.row
		ev.ClaimToken, ev.LeaseUntil = "", nil
		end, ok := ends[ref]
		if !ok {
			// Stale: the job was cancelled, or its lease passed, after
			// the cut-off; the attempt ends as one that lost its job, as
			// the completer's and the failures' stale attempts do.
			r.q.lost(ctx, it.row, cause, it.dur)
			continue
		}
		ev.Status, ev.Error = end.status, end.errText
		if end.status == StatusPending {
			ev.ScheduledAt = end.retryAt
		} else {
			ev.FinishedAt = nullableTime(end.finishedAt)
		}
		r.q.emit(Event{Kind: EventFailed, Job: &ev, Err: cause, Permanent: end.status != StatusPending, Outcome: end.outcome, Duration: it.dur})
	}
}

// closedTimeChan is a channel that is ready at once.
func closedTimeChan() <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}
