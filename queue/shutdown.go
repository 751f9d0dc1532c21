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

// errBudgetSpent is the cause of the context of the shutdown's writes
// (run.writesCtx) once the shutdown's time is spent.
var errBudgetSpent = errors.New("jobqueue: the shutdown's time (ShutdownTimeout, then the grace of cut-off handlers) is spent")

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
// shutdown owns the handlers' parent context; it reads the inflightSet
// only to count.
//
// The releaseList also takes, while the run lasts, the attempts that an
// executor must not start (tooLate; a lease that could not be renewed
// while the attempt waited in the buffer): the executor puts such an
// attempt on it (giveBack) and goes on at once, and the run's giver
// (run.giveBacks) gives back what the list holds in one batch, tried
// again a few times while the database fails it. An executor used to give
// each one back itself, one statement each bounded by dbCallTimeout: in a
// database outage, a worker holding hundreds of buffered attempts had its
// executors, and with them the claimer and the shutdown, wait up to 30 s
// for each, one after another. What the giver has not written when the
// executors are done, releaseInterrupted writes with the rest.

// The writes of the release list (the giver's and releaseInterrupted's),
// the completer's and the executors' failures (recordFailure) run under
// the shutdown's budget (shutdownBudget):
// once the run stops (ctx ended, MaxRuntime passed, StopNow) they end,
// like Run, by the end of ShutdownTimeout and the grace of cut-off
// handlers after it (none of it after StopNow). One whose rows another
// transaction held locked, or
// that the server did not answer, waited up to dbCallTimeout (30 s) and
// held Run's return as long, whatever ShutdownTimeout said. What is not
// written then stays in_progress under its claim, as after a crash, and
// Reclaim takes it back once its lease has passed: no job is lost, and
// none is pending while a handler of this run may still run it.

// shutdownBudget is the context of the shutdown's writes: it ends (cause
// errBudgetSpent) at the earliest end that spendWithin set, and never
// before one was set: the run stops (ctx ended, MaxRuntime passed,
// StopNow), or MaxJobs ended it and its last handler returned
// (awaitExecutors).
//
// Its methods that read it (context, counting, stopped, spent) take a nil
// budget for one that never ends: the run of a test that assembles it.
type shutdownBudget struct {
	ctx context.Context
	end context.CancelCauseFunc
	// stopping is closed by the first spendWithin: the run stops and
	// the budget counts.
	stopping chan struct{}

	mu     sync.Mutex
	timers []*time.Timer
	closed bool
}

// newShutdownBudget returns a budget whose context is parent's until
// spendWithin sets its end.
func newShutdownBudget(parent context.Context) *shutdownBudget {
	ctx, end := context.WithCancelCause(parent)
	return &shutdownBudget{ctx: ctx, end: end, stopping: make(chan struct{})}
}

// spendWithin ends the budget's context d from now, unless an earlier end
// is set already.
func (b *shutdownBudget) spendWithin(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if len(b.timers) == 0 {
		close(b.stopping)
	}
	b.timers = append(b.timers, time.AfterFunc(max(d, 0), func() { b.end(errBudgetSpent) }))
}

// context is the context of the shutdown's writes: the budget's, or
// fallback for a nil budget.
func (b *shutdownBudget) context(fallback context.Context) context.Context {
	if b == nil {
		return fallback
	}
	return b.ctx
}

// stopped is closed once the budget counts (the run stops); nil (never)
// for a nil budget.
func (b *shutdownBudget) stopped() <-chan struct{} {
	if b == nil {
		return nil
	}
	return b.stopping
}

// counting reports whether the budget counts: the run stops.
func (b *shutdownBudget) counting() bool {
	select {
	case <-b.stopped():
		return true
	default:
		return false
	}
}

// spent reports whether the budget's context has ended.
func (b *shutdownBudget) spent() bool { return b != nil && b.ctx.Err() != nil }

// close stops the budget's timers and ends its context (the run is over).
func (b *shutdownBudget) close() {
	b.mu.Lock()
	b.closed = true
	for _, t := range b.timers {
		t.Stop()
	}
	b.mu.Unlock()
	b.end(context.Canceled)
}

// spendWithin ends the shutdown's writes d from now at the latest (see
// shutdownBudget.spendWithin), in a run that has a budget.
func (r *run) spendWithin(d time.Duration) {
	if r.budget != nil {
		r.budget.spendWithin(d)
	}
}

// stopBudget is how long the shutdown's writes may take from the run's
// stop: ShutdownTimeout and the grace of cut-off handlers after it, only
// that grace after StopNow (as awaitExecutors sets it).
func (r *run) stopBudget() time.Duration {
	if r.stoppedNow != nil && r.stoppedNow.Err() != nil {
		return r.abandon
	}
	return max(r.cfg.ShutdownTimeout, 0) + r.abandon
}

// writesCtx is the context of the shutdown's writes: the budget's, or
// dbCtx in a run that has none (tests that assemble a run).
func (r *run) writesCtx() context.Context { return r.budget.context(r.dbCtx) }

// releaseList collects the attempts to release or give back in batches:
// those cut off by shutdown (their handlers returned an error after
// errShutdown, or never started) and those an executor must not start
// (those that never started are given back: unclaim).
type releaseList struct {
	mu    sync.Mutex
	items []releasedAttempt
	// kick wakes the run's giver when a give-back is added (nil: no
	// giver, as in tests that write the list themselves).
	kick chan struct{}
}

// newReleaseList returns an empty list whose give-backs wake a giver.
func newReleaseList() *releaseList { return &releaseList{kick: make(chan struct{}, 1)} }

// releasedAttempt is an attempt on the releaseList: its job as claimed,
// whether its handler started, how long it ran, and why it ends (the
// shutdown's cause, or why it was not started).
type releasedAttempt struct {
	row *JobRow
	// lease is the lease_until the worker last wrote for it
	// (attempt.leaseWritten).
	lease   time.Time
	started bool
	dur     time.Duration
	cause   error
}

// add puts an attempt on the list.
func (l *releaseList) add(row *JobRow, lease time.Time, started bool, dur time.Duration, cause error) {
	l.mu.Lock()
	l.items = append(l.items, releasedAttempt{row: row, lease: lease, started: started, dur: dur, cause: cause})
	l.mu.Unlock()
}

// giveBack puts an attempt whose handler was not started on the list and
// wakes the giver; it never waits for the database.
func (l *releaseList) giveBack(row *JobRow, lease time.Time, cause error) {
	l.add(row, lease, false, 0, cause)
	select {
	case l.kick <- struct{}{}:
	default: // a wake-up is pending already (or there is no giver)
	}
}

// take empties the list and returns what it held.
func (l *releaseList) take() []releasedAttempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	items := l.items
	l.items = nil
	return items
}

// putBack returns items that were taken and not written to the list.
func (l *releaseList) putBack(items []releasedAttempt) {
	l.mu.Lock()
	l.items = append(l.items, items...)
	l.mu.Unlock()
}

// giveBacks is the run's giver: each time executors put attempts to give
// back on the releaseList it writes all the list holds in one batch
// (releaseItems), tried completeTries times in all while the database
// fails it (after completeRetryWait, the wait multiplied by 4 before each
// further try); given up, those jobs stay in_progress until Reclaim. A
// write that failed because the database could not be reached
// (connectionLost) is not counted while the worker runs (outage: given up
// after four tries, the jobs waited for Reclaim, which counted the
// attempts that never ran); its wait ends when the worker stops, as the
// completer's does. It returns once stop is closed, putting back what it
// was trying again, for releaseInterrupted.
func (r *run) giveBacks(stop <-chan struct{}) {
	outage := newOutage(&failureStreak{}, r.budget)
	for {
		select {
		case <-stop:
			return
		case <-r.released.kick:
		}
		items := r.released.take()
		wait := completeRetryWait
		for try := 1; len(items) > 0; {
			failed, err := r.releaseItems(items)
			if err == nil || !connectionLost(err) {
				if ended, _ := outage.ended(); ended {
					r.log.Info("giving back claimed jobs not started again: the database can be reached")
				}
			}
			if err == nil {
				break
			}
			if outage.keeps(err) {
				first, outageWait := outage.failed()
				if first {
					r.log.Warn("giving back claimed jobs not started failed: the database cannot be reached; keeping them until it can be (their jobs stay in_progress meanwhile)", "jobs", len(failed), "err", err)
				} else {
					r.log.Debug("giving back claimed jobs not started failed again: the database cannot be reached", "jobs", len(failed), "err", err, "retry_in", outageWait)
				}
				// The wait ends when the worker stops (its budget counts):
				// from then on the tries count, by the shutdown's rule,
				// and what the jobs wait for is not the outage's wait (up
				// to completeOutageWait) but the database.
				select {
				case <-stop:
					r.released.putBack(failed)
					return
				case <-outage.stopped():
				case <-time.After(outageWait):
				}
				items = failed
				continue
			}
			if try == completeTries {
				r.log.Error("giving back claimed jobs not started failed; they stay in_progress until Reclaim", "jobs", len(failed), "err", err)
				break
			}
			r.log.Warn("giving back claimed jobs not started failed; trying again", "jobs", len(failed), "err", err, "retry_in", wait)
			select {
			case <-stop:
				r.released.putBack(failed)
				return
			case <-time.After(wait):
			}
			wait *= 4
			items = failed
			try++
		}
	}
}

// awaitExecutors waits for the executors (whose work channel is closed) to
// return: as long as they need until stop ends, then ShutdownTimeout (none
// once r.stoppedNow ended: StopNow), then it cancels the handlers' contexts and
// waits r.abandon more. It returns an error when handlers ignored the
// cancellation (they are left running); executors whose handlers all
// returned and that are writing their results (a failure: recordFailure)
// are waited for, their writes ending with the shutdown's budget. In a run
// that ended by itself (MaxJobs: stop has not ended) the handlers take
// the time they need, and the shutdown's budget (ShutdownTimeout and
// r.abandon, as for a stopped run) counts from when the last one returned.
func (r *run) awaitExecutors(stop context.Context, execs *sync.WaitGroup) error {
	execsDone := make(chan struct{})
	go func() { execs.Wait(); close(execsDone) }()
	var handlersDone <-chan struct{} // MaxJobs: told when the last handler returned
	if stop.Err() == nil {
		handlersDone = r.attempts.emptied
	}
	var grace, abandon <-chan time.Time
	stopped := stop.Done()
	var stoppedNow <-chan struct{}
	if r.stoppedNow != nil {
		stoppedNow = r.stoppedNow.Done()
	}
	// cut cancels the handlers' contexts with cause, once; the writes
	// that follow get the handlers' grace.
	cut := func(cause error) {
		grace, stopped, stoppedNow = nil, nil, nil
		r.cancelJobs(cause)
		abandon = time.After(r.abandon)
		r.spendWithin(r.abandon)
	}
	for {
		if handlersDone != nil && r.attempts.len() == 0 {
			handlersDone = nil
			r.spendWithin(max(r.cfg.ShutdownTimeout, 0) + r.abandon)
		}
		select {
		case <-execsDone:
			return nil
		case <-handlersDone: // checked above
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
			r.spendWithin(max(r.cfg.ShutdownTimeout, 0) + r.abandon)
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
			abandon = nil
			n := r.attempts.len()
			if n == 0 {
				continue // the executors write their results, within the budget
			}
			r.log.Error("handlers ignore their cancelled contexts; leaving them", "running", n)
			return fmt.Errorf("jobqueue: worker stopped with %d handler(s) still running %v after their contexts were cancelled; their jobs stay in_progress until Reclaim (make handlers return when their context ends)", n, r.abandon)
		}
	}
}

// releaseInterrupted releases, in one batch, the attempts whose handlers
// returned an error after the shutdown cancelled them, and gives back
// those that never started (and those the giver has not written), once;
// what fails stays in_progress until Reclaim.
func (r *run) releaseInterrupted() {
	items := r.released.take()
	if len(items) == 0 {
		return
	}
	if failed, err := r.releaseItems(items); err != nil {
		r.log.Error("releasing interrupted or unstarted attempts failed; their jobs stay in_progress until Reclaim", "jobs", len(failed), "err", err)
	}
}

// releaseItems releases the attempts of items whose handlers started
// (release: their ends by the queue's rule) and gives back those that
// never started (unclaim: their jobs pending as before their claim, the
// attempt not counted), both fenced by claim token, and emits an event
// with the outcome of each one: EventFailed, or EventLost for an attempt
// that no longer held its job. It returns the items whose write failed
// (nothing is emitted for them) and the error.
func (r *run) releaseItems(items []releasedAttempt) (failed []releasedAttempt, err error) {
	var started, unstarted []attemptRef
	for _, it := range items {
		if it.started {
			started = append(started, it.row.ref())
		} else {
			unstarted = append(unstarted, it.row.ref())
		}
	}
	ctx, cancel := context.WithTimeout(r.writesCtx(), dbCallTimeout)
	defer cancel()
	defer func() {
		if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
	}()
	// The outcome of each attempt: its end (released), given back, or
	// neither (stale); unknown, and returned as failed, when its write
	// failed.
	var ends map[attemptRef]attemptEnd
	givenBack := map[attemptRef]bool{}
	var startedErr, unstartedErr error
	if len(started) > 0 {
		var stale []attemptRef
		stale, ends, startedErr = r.q.releaseEnds(ctx, started)
		if startedErr == nil {
			r.log.Info("released interrupted attempts", "jobs", len(ends), "stale", len(stale))
		}
	}
	if len(unstarted) > 0 {
		var stale []attemptRef
		stale, unstartedErr = r.q.unclaim(ctx, unstarted)
		if unstartedErr == nil {
			for _, ref := range unstarted {
				givenBack[ref] = true
			}
			for _, ref := range stale {
				delete(givenBack, ref)
			}
		}
	}
	for _, it := range items {
		if (it.started && startedErr != nil) || (!it.started && unstartedErr != nil) {
			failed = append(failed, it)
			continue
		}
		r.emitReleased(ctx, it, givenBack, ends)
	}
	return failed, errors.Join(startedErr, unstartedErr)
}

// emitReleased emits the event of the written item it: given back, its
// end, or lost (in neither).
func (r *run) emitReleased(ctx context.Context, it releasedAttempt, givenBack map[attemptRef]bool, ends map[attemptRef]attemptEnd) {
	if !r.q.listening() {
		return
	}
	cause := it.cause
	if cause == nil {
		cause = errShutdown
	}
	ref := it.row.ref()
	if givenBack[ref] {
		r.q.emitGivenBack(it.row, cause)
		return
	}
	end, ok := ends[ref]
	if !ok {
		// Stale: the job was cancelled, or its lease passed, after
		// the cut-off; the attempt ends as one that lost its job, as
		// the completer's and the failures' stale attempts do.
		r.q.lost(ctx, it.row, it.lease, cause, it.dur)
		return
	}
	ev := *it.row
	ev.ClaimToken, ev.LeaseUntil = "", nil
	ev.Status, ev.Error = end.status, end.errText
	if end.status == StatusPending {
		ev.ScheduledAt = end.retryAt
	} else {
		ev.FinishedAt = nullableTime(end.finishedAt)
	}
	r.q.emit(Event{Kind: EventFailed, Job: &ev, Err: cause, Permanent: end.status != StatusPending, Outcome: end.outcome, Duration: it.dur})
}

// closedTimeChan is a channel that is ready at once.
func closedTimeChan() <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}
