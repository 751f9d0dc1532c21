package queue

// Middleware: functions that wrap every handler call of a queue's workers
// (WorkMiddleware) and every enqueue (EnqueueMiddleware), for tracing,
// panic reporting, logging and metrics. The chains are built once (per
// worker run, per queue), so a job pays for a middleware only the call of
// it: with none configured, nothing is added on the way to the handler or
// the insert. How an attempt finally ended (its Outcome, known only once its
// end was written) is heard by a listener (WithListener), not here.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// WorkFunc runs one attempt of a claimed job: the job's handler, or the
// rest of the middleware chain around it.
type WorkFunc func(ctx context.Context, job *JobRow) error

// WorkMiddleware wraps every handler call: it gets the attempt's context,
// the claimed job (id, kind in Name, Type, Attempts counting this one,
// ScheduledAt, payload, …) and next, which runs the rest of the chain and
// the handler. It returns what the attempt returns: next's error, or an
// error of its own (which fails the attempt like a handler's error; wrap it
// with Permanent or RetryAfter to choose how). It may call next with a
// context of its own (one that carries a span, a logger, …), and must treat
// job as read-only. A middleware that does not call next skips the handler.
//
// A panic in the handler reaches the middleware as an error, a *PanicError
// carrying the value and stack (so a panic reporter sees it with
// errors.As); a panic in a middleware is turned into a *PanicError too,
// which the middleware around it sees likewise.
// The handler's context is cancelled, with a cause, when the attempt loses
// its job or the worker shuts down (see context.Cause).
type WorkMiddleware func(ctx context.Context, job *JobRow, next WorkFunc) error

// WithWorkMiddleware adds middleware around every handler call of the
// queue's workers. Middleware runs in the order given, the first outermost;
// several WithWorkMiddleware options append. The queue's middleware wraps
// the worker's own (WorkerConfig.Middleware).
func WithWorkMiddleware(mw ...WorkMiddleware) Option {
	return func(c *config) error {
		for i, m := range mw {
			if m == nil {
				return fmt.Errorf("jobqueue: WithWorkMiddleware: middleware %d is nil", i)
			}
		}
		c.workMW = append(c.workMW, mw...)
		return nil
	}
}

// PanicError is the error of an attempt whose handler (or middleware)
// panicked: the attempt fails with it like with a returned error, and is
// retried by the job's policy.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine's stack where it panicked (runtime/debug.Stack).
	Stack []byte
}

// Error says that the handler panicked, and with what.
func (e *PanicError) Error() string { return fmt.Sprintf("jobqueue: handler panicked: %v", e.Value) }

// Unwrap returns the panic's value when it is an error (panic(err)).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// recovering returns fn with a panic turned into a *PanicError, logged
// with the job.
func recovering(log *slog.Logger, fn WorkFunc) WorkFunc {
	return func(ctx context.Context, job *JobRow) (err error) {
		defer func() {
			if p := recover(); p != nil {
				pe := &PanicError{Value: p, Stack: debug.Stack()}
				log.Error("handler panicked", "job_id", job.ID, "kind", job.Name, "type", job.Type, "attempt", job.Attempts,
					"panic", p, "stack", string(pe.Stack))
				err = pe
			}
		}()
		return fn(ctx, job)
	}
}

// workChain is handler wrapped by mw (the first outermost), each level
// with panics turned into errors, so that every middleware sees a panic of
// the handler or of a middleware inside it as a *PanicError.
func workChain(log *slog.Logger, mw []WorkMiddleware, handler WorkFunc) WorkFunc {
	next := recovering(log, handler)
	for i := len(mw) - 1; i >= 0; i-- {
		m, inner := mw[i], next
		next = recovering(log, func(ctx context.Context, job *JobRow) error { return m(ctx, job, inner) })
	}
	return next
}

// EnqueueCall is one enqueue (Enqueue, EnqueueTx, EnqueueMany or
// EnqueueManyTx) as EnqueueMiddleware sees it: the jobs, checked and about
// to be written. Middleware must not change it.
type EnqueueCall struct {
	// Jobs are the jobs to write, in the order given. Once next has
	// returned, each one's ID (EnqueueMany: only a job with a unique key)
	// and Duplicate are set.
	Jobs []EnqueuedJob
	// Many is true for EnqueueMany and EnqueueManyTx.
	Many bool
	// Tx is the caller's transaction (EnqueueTx, EnqueueManyTx), nil when
	// the queue commits the jobs itself. Jobs written in Tx exist only if
	// it commits, which the middleware does not see.
	Tx *sql.Tx

	// What the end of the chain writes: one job (with its key, if any) or
	// many (plain and keyed), in tx, at now.
	one   *newJob
	key   *uniqueKey
	many  bool
	plain []*newJob
	keyed []keyedJob
	tx    *sql.Tx
	now   time.Time
	// id and n are what the write returned; wrote is set once the end of
	// the chain (writeCall) ran, whatever it returned.
	id    int64
	n     int
	wrote bool
}

// EnqueuedJob is one job of an EnqueueCall.
type EnqueuedJob struct {
	// Kind is the job's kind (JobArgs.Kind), its name column.
	Kind string
	// Type is the queue it goes to.
	Type string
	// Payload is the args as the codec encoded them.
	Payload json.RawMessage
	// ScheduledAt is when it may run first; ExpiresAt its deadline (nil:
	// none).
	ScheduledAt time.Time
	// ExpiresAt is the job's deadline, nil when it has none.
	ExpiresAt *time.Time
	// ID is the new job's id once written by Enqueue or EnqueueTx (the id of
	// the existing job for a duplicate). For EnqueueMany and its variants
	// it is set only for a job with a unique key (the id EnqueueResult
	// tells: the job's, or the holder's for a duplicate); 0 for a job
	// without one, whose id the bulk path does not read back.
	ID int64
	// Duplicate is set when the job's unique key was taken (UniqueKey), so
	// that nothing was written for it.
	Duplicate bool
}

// EnqueueFunc writes an EnqueueCall's jobs: the queue's insert, or the
// rest of the middleware chain around it.
type EnqueueFunc func(ctx context.Context, call *EnqueueCall) error

// EnqueueMiddleware wraps every enqueue: it gets the caller's context, the
// call (its jobs already checked: kind, type, payload, times) and next,
// which writes them. It returns next's error, or an error of its own
// without calling next, in which case nothing is written and the caller
// gets that error. A middleware that returns nil without calling next
// (nothing written, no error to say so) makes the enqueue fail with an
// error that says so (errSkippedWrite), rather than return no id and no
// error as if the jobs had been written. It calls next at most once: a
// second call writes nothing and returns an error that says next was
// called twice (errNextTwice; the jobs stay as the first call left them,
// and Enqueue still returns the first call's id). An enqueue that a unique
// key made a duplicate returns an error wrapping ErrDuplicate from Enqueue
// and EnqueueTx; EnqueueMany marks the job Duplicate and returns nil. Bad
// input (ErrInvalidJob, …) is refused before the middleware runs.
type EnqueueMiddleware func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error

// WithEnqueueMiddleware adds middleware around every enqueue of the queue.
// Middleware runs in the order given, the first outermost; several
// WithEnqueueMiddleware options append.
func WithEnqueueMiddleware(mw ...EnqueueMiddleware) Option {
	return func(c *config) error {
		for i, m := range mw {
			if m == nil {
				return fmt.Errorf("jobqueue: WithEnqueueMiddleware: middleware %d is nil", i)
			}
		}
		c.enqueueMW = append(c.enqueueMW, mw...)
		return nil
	}
}

// enqueueChain is write wrapped by mw (the first outermost); nil when there
// is no middleware, so that an enqueue then builds no EnqueueCall. Each
// level returns errSkippedWrite when its middleware returned nil without
// the end of the chain having run, so that the middleware around it (a
// span, a counter) sees the failure the caller gets.
func enqueueChain(mw []EnqueueMiddleware, write EnqueueFunc) EnqueueFunc {
	if len(mw) == 0 {
		return nil
	}
	next := write
	for i := len(mw) - 1; i >= 0; i-- {
		m, inner := mw[i], next
		next = func(ctx context.Context, call *EnqueueCall) error {
			if err := m(ctx, call, inner); err != nil {
				return err
			}
			if !call.wrote {
				return errSkippedWrite
			}
			return nil
		}
	}
	return next
}

// view is j as middleware sees it.
func (j *newJob) view() EnqueuedJob {
	return EnqueuedJob{Kind: j.name, Type: j.typ, Payload: j.payload, ScheduledAt: j.scheduledAt, ExpiresAt: j.expiresAt}
}

// errNoWrite is the error of a middleware that passed next a call of its
// own making rather than the one it was given.
var errNoWrite = errors.New("jobqueue: enqueue middleware passed next an EnqueueCall the queue did not make; pass on the call it was given")

// errSkippedWrite is the error of an enqueue whose middleware returned nil
// without calling next: nothing was written.
var errSkippedWrite = errors.New("jobqueue: enqueue middleware returned without calling next and without an error, so nothing was written; " +
	"a middleware must call next, or return an error of its own to refuse the enqueue")

// errNextTwice is the error of a second call of next within one enqueue:
// the second call writes nothing (the jobs would be written twice).
var errNextTwice = errors.New("jobqueue: enqueue middleware called next a second time; that call wrote nothing " +
	"(the jobs were written once, by the first call, unless it returned an error): a middleware must call next at most once")

// writeCall is the end of the enqueue chain: it writes call's jobs and
// records the ids and duplicates in call.Jobs, once; a second call (a
// middleware that called next twice) writes nothing and returns
// errNextTwice.
func (q *Queue) writeCall(ctx context.Context, call *EnqueueCall) error {
	if call.wrote {
		return errNextTwice
	}
	call.wrote = true
	switch {
	case call.one != nil:
		id, err := q.writeOne(ctx, call.tx, call.one, call.key, call.now)
		call.id, call.Jobs[0].ID, call.Jobs[0].Duplicate = id, id, errors.Is(err, ErrDuplicate)
		return err
	case call.many:
		n, err := q.writeMany(ctx, call.tx, call.plain, call.keyed, len(call.Jobs), call.now)
		call.n = n
		for _, k := range call.keyed {
			call.Jobs[k.at].ID, call.Jobs[k.at].Duplicate = k.id, k.dup
		}
		return err
	}
	return errNoWrite
}
