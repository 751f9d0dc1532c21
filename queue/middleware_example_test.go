package queue_test

// Examples of middleware (WithWorkMiddleware, WorkerConfig.Middleware,
// WithEnqueueMiddleware) and of the outcome of each attempt heard by a
// listener, on SQLite in a temp dir (openExampleQueue, example_more_test.go).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/jobqueue/jobqueue/queue"
)

// Work middleware wraps every handler call: here a logger around each
// attempt and a panic reporter. A panicking handler reaches the middleware
// as a *queue.PanicError (value and stack), and the attempt fails like with
// a returned error. Tracing works the same way: start a span, call next
// with the span's context, end it with next's error (the
// github.com/jobqueue/jobqueue/otel package does that).
func ExampleWithWorkMiddleware() {
	ctx := context.Background()
	logging := func(ctx context.Context, job *queue.JobRow, next queue.WorkFunc) error {
		fmt.Printf("start %s %d (attempt %d)\n", job.Name, job.ID, job.Attempts)
		err := next(ctx, job)
		fmt.Printf("end %s %d: %v\n", job.Name, job.ID, err)
		return err
	}
	reportPanics := func(ctx context.Context, job *queue.JobRow, next queue.WorkFunc) error {
		err := next(ctx, job)
		var pe *queue.PanicError
		if errors.As(err, &pe) {
			fmt.Printf("report: job %d panicked with %v (stack of %t)\n", job.ID, pe.Value, len(pe.Stack) > 0)
		}
		return err
	}
	q, _, done := openExampleQueue(queue.WithWorkMiddleware(logging, reportPanics))
	defer done()
	if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}, queue.Type("email")); err != nil {
		log.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, SendEmail{To: ""}, queue.Type("email"), queue.Policy(queue.RetryPolicy{
		MaxAttempts: 1, BaseDelay: queue.DefaultRetryPolicy().BaseDelay, MaxDelay: queue.DefaultRetryPolicy().MaxDelay})); err != nil {
		log.Fatal(err)
	}

	w := q.NewWorker(queue.WorkerConfig{Types: []string{"email"}, Concurrency: 1, MaxJobs: 2})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		if job.Args.To == "" {
			panic("no address")
		}
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// start send_email 1 (attempt 1)
	// end send_email 1: <nil>
	// start send_email 2 (attempt 1)
	// report: job 2 panicked with no address (stack of true)
	// end send_email 2: jobqueue: handler panicked: no address
}

// Enqueue middleware wraps every enqueue (one, many, in the caller's
// transaction) once its jobs are checked; after next returns it sees their
// ids and which were duplicates of a unique key (for EnqueueMany, the ids of
// the jobs with a key: the job's own, or for a duplicate its holder's; the
// job without a key, written by the plain bulk path, has no id read back).
func ExampleWithEnqueueMiddleware() {
	ctx := context.Background()
	logEnqueues := func(ctx context.Context, call *queue.EnqueueCall, next queue.EnqueueFunc) error {
		err := next(ctx, call)
		for _, j := range call.Jobs {
			fmt.Printf("enqueue %s to %q (many %t, in tx %t): id %d, duplicate %t, err %v\n",
				j.Kind, j.Type, call.Many, call.Tx != nil, j.ID, j.Duplicate, err)
		}
		return err
	}
	q, db, done := openExampleQueue(queue.WithEnqueueMiddleware(logEnqueues))
	defer done()

	if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}, queue.Type("email")); err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.EnqueueTx(ctx, tx, SendEmail{To: "bob@example.com"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	n, err := q.EnqueueMany(ctx, []queue.JobArgs{
		SendEmail{To: "c@example.com"},
		queue.WithOptions(SendEmail{To: "d@example.com"}, queue.UniqueKey("d")),
		queue.WithOptions(SendEmail{To: "d@example.com"}, queue.UniqueKey("d")),
	}, queue.Type("bulk"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("written by EnqueueMany:", n)
	// Output:
	// enqueue send_email to "email" (many false, in tx false): id 1, duplicate false, err <nil>
	// enqueue send_email to "default" (many false, in tx true): id 2, duplicate false, err <nil>
	// enqueue send_email to "bulk" (many true, in tx false): id 0, duplicate false, err <nil>
	// enqueue send_email to "bulk" (many true, in tx false): id 4, duplicate false, err <nil>
	// enqueue send_email to "bulk" (many true, in tx false): id 4, duplicate true, err <nil>
	// written by EnqueueMany: 2
}

// A listener hears how each attempt ended (Event.Outcome): completed,
// retried, failed, expired, and, for an attempt fenced off from its job
// (EventLost), cancelled or lost. Telemetry counts attempts by it.
func ExampleEvent_outcome() {
	ctx := context.Background()
	var mu sync.Mutex
	outcomes := map[queue.Outcome]int{}
	q, _, done := openExampleQueue(queue.WithListener(func(ev queue.Event) {
		switch ev.Kind {
		case queue.EventCompleted, queue.EventFailed, queue.EventLost:
			mu.Lock()
			outcomes[ev.Outcome]++
			mu.Unlock()
		}
	}))
	defer done()
	one := queue.Policy(queue.RetryPolicy{MaxAttempts: 1, BaseDelay: queue.DefaultRetryPolicy().BaseDelay, MaxDelay: queue.DefaultRetryPolicy().MaxDelay})
	for _, to := range []string{"ok", "retry", "fail", "cancel"} {
		opts := []queue.EnqueueOption{queue.Type("email")}
		if to == "fail" {
			opts = append(opts, one)
		}
		if _, err := q.Enqueue(ctx, SendEmail{To: to}, opts...); err != nil {
			log.Fatal(err)
		}
	}
	w := q.NewWorker(queue.WorkerConfig{Types: []string{"email"}, Concurrency: 1, MaxJobs: 4})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		switch job.Args.To {
		case "retry", "fail":
			return errors.New("smtp down")
		case "cancel":
			// Cancelled while it runs (by anyone, anywhere): its attempt is
			// fenced off, and its result changes nothing.
			return q.Cancel(ctx, job.ID)
		}
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	for _, o := range queue.Outcomes() {
		fmt.Printf("%s: %d\n", o, outcomes[o])
	}
	// Output:
	// completed: 1
	// retried: 1
	// failed: 1
	// expired: 0
	// cancelled: 1
	// lost: 0
}
