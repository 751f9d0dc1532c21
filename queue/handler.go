package queue

import (
	"context"
	"errors"
	"fmt"
	"reflect"
)

// ErrUnknownKind is the error (wrapped, with the kind's name) of an attempt
// whose job has a kind that the worker has no handler for and no default
// handler. Such an attempt fails like any handler error and is retried by
// the job's policy, since another worker (a newer deploy) may know the kind;
// once its attempts are used up the job fails with this error.
var ErrUnknownKind = errors.New("jobqueue: unknown job kind")

// handlerFunc runs one claimed job.
type handlerFunc func(ctx context.Context, row *JobRow) error

// Handle registers fn as w's handler for the jobs of kind T: those whose
// name is the Kind() of T's zero value (for a pointer type, of a new value).
// The payload is decoded into T with the queue's codec; a payload that does
// not decode fails the attempt for good (retrying would not help), with an
// error that names the job, its kind and T.
//
// Register handlers before Run; Handle panics when Run is in progress, when
// T's Kind() is empty, or when the kind already has a handler (a
// programming error, found at start-up).
func Handle[T JobArgs](w *Worker, fn func(ctx context.Context, job *Job[T]) error) {
	if fn == nil {
		panic("jobqueue: Handle: the handler is nil")
	}
	kind := kindOf[T]()
	if kind == "" {
		panic(fmt.Sprintf("jobqueue: Handle: %s.Kind() is empty; a job kind needs a name", typeName[T]()))
	}
	w.register(kind, func(ctx context.Context, row *JobRow) error {
		var args T
		if rt := reflect.TypeFor[T](); rt.Kind() == reflect.Pointer {
			// Decode into a fresh value rather than through a nil pointer.
			args = reflect.New(rt.Elem()).Interface().(T)
			if err := w.q.codec.Unmarshal(row.Payload, args); err != nil {
				return decodeError[T](row, err)
			}
		} else if err := w.q.codec.Unmarshal(row.Payload, &args); err != nil {
			return decodeError[T](row, err)
		}
		return fn(ctx, &Job[T]{JobRow: row, Args: args})
	})
}

// HandleDefault registers fn as w's catch-all: it runs every job whose kind
// has no handler registered with Handle, with the row as stored (payload
// undecoded). Without it such jobs fail with ErrUnknownKind. Calling it
// again replaces the previous catch-all; it panics when Run is in progress.
func (w *Worker) HandleDefault(fn func(ctx context.Context, job *JobRow) error) {
	if fn == nil {
		panic("jobqueue: HandleDefault: the handler is nil")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		panic("jobqueue: HandleDefault called while the worker runs; register handlers before Run")
	}
	w.fallback = fn
}

// register adds the handler of one kind.
func (w *Worker) register(kind string, h handlerFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		panic(fmt.Sprintf("jobqueue: Handle(%q) called while the worker runs; register handlers before Run", kind))
	}
	if _, dup := w.handlers[kind]; dup {
		panic(fmt.Sprintf("jobqueue: Handle: kind %q already has a handler on this worker", kind))
	}
	w.handlers[kind] = h
}

// kindOf is the Kind() of T's zero value, or of a new value when T is a
// pointer type (whose zero value is nil).
func kindOf[T JobArgs]() string {
	var zero T
	if rt := reflect.TypeFor[T](); rt.Kind() == reflect.Pointer {
		zero = reflect.New(rt.Elem()).Interface().(T)
	}
	return zero.Kind()
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// decodeError is the permanent error of a payload that does not decode.
func decodeError[T any](row *JobRow, err error) error {
	return Permanent(fmt.Errorf("jobqueue: job %d (kind %q): the payload does not decode into %s: %w (fix the producer; retrying cannot help)",
		row.ID, row.Name, typeName[T](), err))
}

// unknownKind is the error of a job whose kind has no handler.
func unknownKind(row *JobRow) error {
	return fmt.Errorf("%w %q: no handler on this worker (register one with queue.Handle, or a catch-all with Worker.HandleDefault)",
		ErrUnknownKind, row.Name)
}
