package queue_test

// Examples of DeleteMany, WithLogger, IsPermanent and ErrUnknownKind, on
// SQLite in a temp dir (openExampleQueue, example_more_test.go).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/jobqueue/jobqueue/queue"
)

// DeleteMany deletes many jobs in one statement per batch and gives a
// result per id, in the order given; an id it did not delete has an error
// wrapping ErrJobNotFound, or ErrJobRunning for a running job (cancel it
// first).
func ExampleQueue_DeleteMany() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()
	for range 3 {
		if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}); err != nil {
			log.Fatal(err)
		}
	}

	res, err := q.DeleteMany(ctx, []int64{1, 3, 42})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		fmt.Println(r.ID, r.Err == nil, errors.Is(r.Err, queue.ErrJobNotFound))
	}
	stats, err := q.Stats(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", stats[queue.StatusPending])
	// Output:
	// 1 true false
	// 3 true false
	// 42 false true
	// left: 1
}

// WithLogger sends the queue's logs (workers, maintenance, actions such as
// Cancel) to a logger of the service's own; every record carries the
// table. The default is slog.Default().
func ExampleWithLogger() {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for a stable example output
			}
			return a
		},
	}))
	q, _, done := openExampleQueue(queue.WithLogger(logger))
	defer done()
	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"})
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Cancel(ctx, id); err != nil {
		log.Fatal(err)
	}
	// Output:
	// level=INFO msg="jobs cancelled" table=jobs count=1
}

// IsPermanent tells a handler's error made by Permanent, also wrapped, from
// one the job is retried after: a middleware can alert only on those.
func ExampleIsPermanent() {
	invalid := queue.Permanent(errors.New("invalid address"))
	fmt.Println(queue.IsPermanent(invalid))
	fmt.Println(queue.IsPermanent(fmt.Errorf("send_email: %w", invalid)))
	fmt.Println(queue.IsPermanent(errors.New("smtp: timeout")))
	// Output:
	// true
	// true
	// false
}

// A job whose kind has no handler on the worker (and no HandleDefault)
// fails with an error wrapping ErrUnknownKind, and is retried by its policy,
// since another worker (a newer deploy) may know the kind.
func ExampleWorker_unknownKind() {
	ctx := context.Background()
	q, _, done := openExampleQueue(queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventFailed {
			fmt.Println("unknown kind:", errors.Is(ev.Err, queue.ErrUnknownKind), "outcome:", ev.Outcome)
		}
	}))
	defer done()
	if _, err := q.Enqueue(ctx, queue.RawArgs{Name: "resize_image"}); err != nil {
		log.Fatal(err)
	}

	w := q.NewWorker(queue.WorkerConfig{MaxJobs: 1})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error { return nil })
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// unknown kind: true outcome: retried
}
