package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// executors run the handlers of one run: Concurrency goroutines, each
// running the attempts handed to it one at a time (loop). An executor owns
// the attempt it runs until the handler returns; then it settles its
// result: a success goes to the completer, which removes the attempt from
// the inflightSet once its completion is written; a failure is written
// here (fenced by the claim token), the attempt kept in the inflightSet
// until then, so that heartbeats keep the lease of a result being written;
// an attempt cut off by shutdown, or one it must not start, goes to the
// releaseList, and the result of an attempt that lost its job is dropped
// (those leave the set at once). It writes nothing else.
type executors struct {
	q        *Queue
	log      *slog.Logger
	dbCtx    context.Context // the worker's statements (see run.dbCtx)
	handlers map[string]handlerFunc
	fallback handlerFunc
	// work runs an attempt: handle wrapped by the middleware (workChain).
	work WorkFunc

	attempts  *inflightSet
	completer *completer
	released  *releaseList

	// budget is the run's shutdown budget: once it counts (the worker
	// stops) a failure that cannot reach the database is given up after
	// completeTries like any other (outage). Nil: the worker never stops
	// (tests that assemble executors).
	budget *shutdownBudget
	// outages follows the outages in which failures could not be
	// recorded, logged once for all the executors (recordFailure).
	outages failureStreak
}

// errHandlerExited is the error recorded for an attempt whose handler
// ended its goroutine without returning.
var errHandlerExited = errors.New("the handler ended its goroutine without returning (runtime.Goexit, as t.FailNow does)")

// loop runs the attempts of work until it is closed, telling freed how
// long each handler took once it returned. A handler that ends the
// goroutine without returning (runtime.Goexit: t.FailNow or a test helper
// in a handler) ends this loop with it, and recover cannot stop that; the
// loop's deferred call then records the attempt as failed
// (errHandlerExited), frees its slot and calls restart, which starts an
// executor in its place. Before, the attempt stayed in the inflightSet,
// its lease renewed for the whole run, and the worker had a slot fewer.
func (e *executors) loop(work <-chan *attempt, freed chan<- time.Duration, restart func()) {
	var cur *attempt // the attempt being executed
	var start time.Time
	defer func() {
		if cur == nil {
			return // work was closed
		}
		dur := time.Since(start)
		e.attempts.remove(cur.ref)
		cur.cancel(context.Canceled)
		e.recordFailure(cur, errHandlerExited, dur, e.jobLog(cur.row))
		freed <- dur
		restart()
	}()
	for a := range work {
		cur, start = a, time.Now()
		d := e.execute(a)
		cur = nil
		freed <- d
	}
}

// notStarted is what execute returns for an attempt it did not start: no
// handler ran, so the claimer takes back the slot without folding a
// duration into its average of handlers (a 0 for each cancelled or given
// back attempt pulled the average down, and so claimed ahead more for
// handlers too long for it).
const notStarted time.Duration = -1

// execute runs one attempt's handler, records its result and returns how
// long the handler ran, or notStarted. An attempt whose context was
// cancelled before it started (it waited in the claimer's buffer while the
// shutdown cancelled the handlers, or a heartbeat found its job lost or
// its lease unrenewable) is not started: see notStartedCancelled. Nor is
// one whose lease or whose job's deadline has passed meanwhile (tooLate):
// it is given back.
func (e *executors) execute(a *attempt) time.Duration {
	defer a.cancel(context.Canceled)
	row := a.row
	if cause := context.Cause(a.ctx); cause != nil {
		e.attempts.remove(a.ref)
		e.notStartedCancelled(a, cause)
		return notStarted
	}
	if late := e.tooLate(a); late != "" {
		e.attempts.remove(a.ref)
		e.giveBack(a, late)
		return notStarted
	}
	if e.readBeforeStart(a) && e.lostSinceClaim(a) {
		return notStarted
	}
	start := time.Now()
	err := e.work(a.ctx, row)
	dur := time.Since(start)

	// A success or failure stays in the inflightSet, settling, until it is
	// written (e.handOver, recordFailure), so that heartbeats keep its
	// lease while the write is held back; the other ends leave it now.
	cause := context.Cause(a.ctx)
	switch {
	case err == nil && errors.Is(cause, errLeaseRanOut):
		// Cancelled because its lease could not be renewed, yet done: the
		// job may still be this attempt's (the renewals failed, not the
		// job), so its completion is written, fenced by its claim token
		// like any (refused if the job was reclaimed meanwhile). Dropped,
		// the job stayed in_progress until Reclaim ran the work again.
		e.jobLog(row).Warn("handler finished after its lease could not be renewed; completing the job unless it was reclaimed meanwhile", "duration", dur)
		e.handOver(a, dur)
		return dur
	case errors.Is(cause, ErrLeaseLost):
		e.attempts.remove(a.ref)
		e.jobLog(row).Warn("handler finished after its attempt lost the job (or could not renew its lease); result dropped, the job is left to Reclaim",
			"handler_err", err, "duration", dur, "cause", cause)
		e.q.lost(e.dbCtx, row, e.attempts.written(a), err, dur)
		return dur
	case err == nil:
		e.handOver(a, dur)
		return dur
	}
	if cutOffByShutdown(cause) {
		e.attempts.remove(a.ref)
		e.jobLog(row).Info("handler cancelled by shutdown; releasing its job", "handler_err", err, "duration", dur)
		e.released.add(row, e.attempts.written(a), true, dur, cause)
		return dur
	}
	e.attempts.markSettling(a.ref)
	e.recordFailure(a, err, dur, e.jobLog(row))
	e.attempts.remove(a.ref)
	return dur
}

// notStartedCancelled settles attempt a, whose context was cancelled
// with cause before its handler started. Its handler never ran, so the
// attempt must not count against the job: cut off by the shutdown, it goes
// on the releaseList (given back with the others in one batch); its lease
// unrenewable (errLeaseRanOut: the renewals failed, the job may still be
// its own), it is given back like an attempt too late to start
// (giveBack: fenced by its claim token, so a job another worker has
// reclaimed meanwhile is left alone). Before, it was left to Reclaim,
// which counted the attempt: a job of one attempt failed for good without
// running. Found lost by a heartbeat (errLostJob: the job is no longer its
// own), there is nothing to give back.
func (e *executors) notStartedCancelled(a *attempt, cause error) {
	row := a.row
	switch {
	case cutOffByShutdown(cause):
		e.log.Info("claimed job not started before shutdown; releasing it", "job_id", row.ID, "kind", row.Name)
		e.released.add(row, e.attempts.written(a), false, 0, cause)
	case errors.Is(cause, errLostJob):
		e.log.Warn("claimed job not started: its attempt lost the job before it began",
			"job_id", row.ID, "kind", row.Name, "cause", cause)
		e.q.lost(e.dbCtx, row, e.attempts.written(a), nil, 0)
	default:
		e.giveBack(a, "its lease could not be renewed while it waited")
	}
}

// handOver hands the succeeded attempt a, whose handler ran dur, to the
// completer; it stays in the inflightSet, settling, until the completer
// has written or given up its completion.
func (e *executors) handOver(a *attempt, dur time.Duration) {
	e.attempts.markSettling(a.ref)
	e.completer.add(completion{a: a, dur: dur})
}

// tooLate says why attempt a, about to start, must not start any more, or
// "" when it may: its lease has passed by the queue's clock (the process
// was paused while the attempt waited in the claimer's buffer, say, so
// that no heartbeat renewed it: another worker may have reclaimed the job
// and be running it), or its job's deadline has (a job is not started
// past its ExpiresAt).
func (e *executors) tooLate(a *attempt) string {
	now := e.q.now()
	// A lease ends for Reclaim once lease_until < now as the statement
	// sends it: MySQL sends now in whole seconds, so there a lease_until
	// (itself cut to the second) holds until a second after it.
	if e.q.kind == engine.MySQL {
		now = now.Add(-time.Second)
	}
	// Heartbeats move a lease on: one that the claim gave beyond now
	// needs no look at the set (and its lock) on the hot path. (After
	// the wall clock was stepped back a renewal writes an earlier end;
	// that attempt is then judged by the claim's end, which only matters
	// if the renewals stopped too: README, Clocks.)
	if l := a.row.LeaseUntil; l == nil || !now.Before(*l) {
		if end, ok := e.attempts.leaseEndOf(a.ref); ok && !now.Before(end) {
			return "its lease passed before it started"
		}
	}
	if x := a.row.ExpiresAt; x != nil && !x.After(e.q.now()) {
		return "its deadline passed before it started"
	}
	return ""
}

// giveBack gives back the attempt a, which was not started (why says
// why): it goes on the releaseList, whose giver gives it back with the
// others in one batch (run.giveBacks: Queue.unclaim, fenced by its claim
// token: pending as before its claim, its attempt not counted, a job past
// its deadline then expired by ExpireOverdue; EventLost if it no longer
// holds its job). The executor does not wait for the database: in an
// outage it goes on with the next attempt. When the writes fail the job
// stays in_progress for Reclaim.
func (e *executors) giveBack(a *attempt, why string) {
	row := a.row
	e.log.Warn("claimed job not started ("+why+"); giving it back", "job_id", row.ID, "kind", row.Name)
	e.released.giveBack(row, e.attempts.written(a), errors.New("jobqueue: claimed job not started: "+why))
}

// jobLog is the logger of the lines about one attempt of row. It is made
// only for the lines written (a success writes none), so that the hot path
// of a short handler allocates no logger.
func (e *executors) jobLog(row *JobRow) *slog.Logger {
	return e.log.With("job_id", row.ID, "kind", row.Name, "type", row.Type, "attempt", row.Attempts)
}

// recordFailure writes the failed attempt a (handler error err) by the
// queue's rule and emits EventFailed. A write that fails (a connection
// drops, a statement is refused) is tried again like a completion:
// completeTries times in all, after completeRetryWait, the wait multiplied
// by 4 before each further try. Given up, the job stays in_progress until
// Reclaim, which makes it pending again at once: the handler's Permanent
// or RetryAfter and its error text would be lost. So a write that failed
// because the database could not be reached (connectionLost: a restart, a
// failover) is not counted until the worker stops (outage), the
// executor's slot held meanwhile (no job can be claimed anyway). Its
// writes run under the run's shutdown budget, as the completer's and the
// give-backs': once the shutdown's time is spent the failure is given up
// at once, its job left in_progress for Reclaim once its lease has
// passed; it held Run's return up to dbCallTimeout at each try.
func (e *executors) recordFailure(a *attempt, err error, dur time.Duration, log *slog.Logger) {
	row := a.row
	var end attemptEnd
	var ferr error
	writes := e.budget.context(e.dbCtx)
	wait := completeRetryWait
	outage := newOutage(&e.outages, e.budget)
	// lost are the ends of the writes that failed with their connection,
	// and may have been carried out (Queue.failLanded).
	var lost []attemptEnd
	for try := 1; ; {
		ctx, cancel := context.WithTimeout(writes, dbCallTimeout)
		end, ferr = e.q.failAttempt(ctx, row, err)
		cancel()
		if h := e.q.afterFail; h != nil {
			ferr = h(ferr)
		}
		if len(lost) > 0 && errors.Is(ferr, ErrLeaseLost) {
			ctx, cancel := context.WithTimeout(writes, dbCallTimeout)
			if landed, ok := e.q.failLanded(ctx, row, lost); ok {
				end, ferr = landed, nil
			}
			cancel()
		}
		if connectionLost(ferr) {
			lost = append(lost, end)
		}
		if ferr == nil || !connectionLost(ferr) {
			if ended, _ := outage.ended(); ended {
				log.Info("recording failed attempts again: the database can be reached")
			}
		}
		if ferr == nil || errors.Is(ferr, ErrLeaseLost) {
			break
		}
		if outage.keeps(ferr) {
			first, outageWait := outage.failed()
			if first {
				log.Warn("recording a failed attempt failed: the database cannot be reached; keeping it until it can be (the job stays in_progress meanwhile)", "handler_err", err, "err", ferr)
			} else {
				log.Debug("recording a failed attempt failed again: the database cannot be reached", "handler_err", err, "err", ferr, "retry_in", outageWait)
			}
			e.pause(outageWait)
			continue
		}
		if try == completeTries || outage.spent() {
			break
		}
		log.Warn("recording a failed attempt failed; trying again", "handler_err", err, "err", ferr, "retry_in", wait)
		e.pause(wait)
		wait *= 4
		try++
	}
	if cause := context.Cause(writes); ferr != nil && cause != nil && !errors.Is(ferr, cause) {
		ferr = fmt.Errorf("%w (%w)", ferr, cause)
	}
	ctx, cancel := context.WithTimeout(writes, dbCallTimeout)
	defer cancel()
	if ferr != nil {
		if errors.Is(ferr, ErrLeaseLost) {
			log.Warn("handler failed after its attempt lost the job; nothing recorded", "handler_err", err, "duration", dur)
			e.q.lost(ctx, row, e.attempts.written(a), err, dur)
		} else {
			log.Error("recording a failed attempt failed; the job stays in_progress until Reclaim", "handler_err", err, "err", ferr)
		}
		return
	}
	permanent := end.status != StatusPending
	if permanent {
		log.Error("job failed for good", "status", end.status, "err", err, "duration", dur)
	} else {
		log.Warn("job attempt failed; will retry", "err", err, "next_at", end.retryAt, "duration", dur)
	}
	if !e.q.listening() {
		return
	}
	ev := *row
	ev.Status, ev.Error, ev.ClaimToken, ev.LeaseUntil = end.status, end.errText, "", nil
	if permanent {
		ev.FinishedAt = nullableTime(end.finishedAt)
	} else {
		ev.ScheduledAt = end.retryAt
	}
	e.q.emit(Event{Kind: EventFailed, Job: &ev, Err: err, Permanent: permanent, Outcome: end.outcome, Duration: dur})
}

// pause waits d, or until the worker stops (its budget counts).
func (e *executors) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.budget.stopped():
	}
}

// handle runs the handler of the job's kind (the end of the work chain).
func (e *executors) handle(ctx context.Context, row *JobRow) error {
	if h, ok := e.handlers[row.Name]; ok {
		return h(ctx, row)
	}
	if e.fallback != nil {
		return e.fallback(ctx, row)
	}
	return unknownKind(row)
}
