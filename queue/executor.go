package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// executors run the handlers of one run: Concurrency goroutines, each
// running the attempts handed to it one at a time (loop). An executor owns
// the attempt it runs until the handler returns; then it removes the
// attempt from the inflightSet and settles its result: a success goes to
// the completer, a failure is written here (fenced by the claim token), an
// attempt cut off by shutdown goes to the releaseList, and the result of
// an attempt that lost its job is dropped. It writes nothing else.
type executors struct {
	q        *Queue
	log      *slog.Logger
	dbCtx    context.Context // the worker's statements (see run.dbCtx)
	handlers map[string]handlerFunc
	fallback handlerFunc

	attempts  *inflightSet
	completer *completer
	released  *releaseList
}

// loop runs the attempts of work until it is closed, telling freed how
// long each handler took once it returned.
func (e *executors) loop(work <-chan *attempt, freed chan<- time.Duration) {
	for a := range work {
		freed <- e.execute(a)
	}
}

// execute runs one attempt's handler, records its result and returns how
// long the handler ran. An attempt whose context was cancelled before it
// started (it waited in the claimer's buffer while a heartbeat found its
// job lost or its lease unrenewable, or while the shutdown cancelled the
// handlers) is not started: its job is left to Reclaim, or released with
// the attempts the shutdown cut off.
func (e *executors) execute(a *attempt) time.Duration {
	defer a.cancel(context.Canceled)
	row := a.row
	if cause := context.Cause(a.ctx); cause != nil {
		e.attempts.remove(a.ref)
		if errors.Is(cause, errShutdown) {
			e.log.Info("claimed job not started before shutdown; releasing it", "job_id", row.ID, "kind", row.Name)
			e.released.add(a.ref)
		} else {
			e.log.Warn("claimed job not started: its attempt lost the job before it began; the job is left to Reclaim",
				"job_id", row.ID, "kind", row.Name, "cause", cause)
		}
		return 0
	}
	log := e.log.With("job_id", row.ID, "kind", row.Name, "type", row.Type, "attempt", row.Attempts)
	start := time.Now()
	err := e.call(a, log)
	dur := time.Since(start)
	e.attempts.remove(a.ref)

	cause := context.Cause(a.ctx)
	switch {
	case errors.Is(cause, ErrLeaseLost):
		log.Warn("handler finished after its attempt lost the job (or could not renew its lease); result dropped, the job is left to Reclaim",
			"handler_err", err, "duration", dur, "cause", cause)
		return dur
	case err == nil:
		e.completer.add(completion{a: a, dur: dur})
		return dur
	case errors.Is(cause, errShutdown):
		log.Info("handler cancelled by shutdown; releasing its job", "handler_err", err, "duration", dur)
		e.released.add(a.ref)
		return dur
	}
	e.recordFailure(a, err, dur, log)
	return dur
}

// recordFailure writes the failed attempt a (handler error err) by the
// queue's rule and emits EventFailed.
func (e *executors) recordFailure(a *attempt, err error, dur time.Duration, log *slog.Logger) {
	row := a.row
	ctx, cancel := context.WithTimeout(e.dbCtx, dbCallTimeout)
	defer cancel()
	status, next, ferr := e.q.fail(ctx, row, err)
	if ferr != nil {
		if errors.Is(ferr, ErrLeaseLost) {
			log.Warn("handler failed after its attempt lost the job; nothing recorded", "handler_err", err, "duration", dur)
		} else {
			log.Error("recording a failed attempt failed; the job stays in_progress until Reclaim", "handler_err", err, "err", ferr)
		}
		return
	}
	ev := *row
	ev.Status, ev.Error, ev.ClaimToken, ev.LeaseUntil = status, errorText(err), "", nil
	permanent := status != StatusPending
	if permanent {
		now := e.q.now()
		ev.FinishedAt = &now
		log.Error("job failed for good", "status", status, "err", err, "duration", dur)
	} else {
		ev.ScheduledAt = next
		log.Warn("job attempt failed; will retry", "err", err, "next_at", next, "duration", dur)
	}
	e.q.emit(Event{Kind: EventFailed, Job: &ev, Err: err, Permanent: permanent, Duration: dur})
}

// call runs the attempt's handler, turning a panic into an error.
func (e *executors) call(a *attempt, log *slog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("handler panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("jobqueue: handler panicked: %v", p)
		}
	}()
	if h, ok := e.handlers[a.row.Name]; ok {
		return h(a.ctx, a.row)
	}
	if e.fallback != nil {
		return e.fallback(a.ctx, a.row)
	}
	return unknownKind(a.row)
}
