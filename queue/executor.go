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

// loop runs the attempts of work until it is closed, telling freed after
// each one.
func (e *executors) loop(work <-chan *attempt, freed chan<- struct{}) {
	for a := range work {
		e.execute(a)
		freed <- struct{}{}
	}
}

// execute runs one attempt's handler and records its result.
func (e *executors) execute(a *attempt) {
	defer a.cancel(context.Canceled)
	row := a.row
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
		return
	case err == nil:
		e.completer.add(completion{a: a, dur: dur})
		return
	case errors.Is(cause, errShutdown):
		log.Info("handler cancelled by shutdown; releasing its job", "handler_err", err, "duration", dur)
		e.released.add(a.ref)
		return
	}
	e.recordFailure(a, err, dur, log)
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
