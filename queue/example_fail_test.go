package queue_test

// Examples of failing a job from its handler (Permanent, RetryAfter), on
// SQLite in a temp dir (openExampleQueue, example_more_test.go).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/jobqueue/jobqueue/queue"
)

// runUntilFailed runs a worker with handler until one attempt has failed,
// then stops it; the examples below use it.
func runUntilFailed(q *queue.Queue, failed <-chan struct{}, handler func(context.Context, *queue.Job[SendEmail]) error) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		<-failed
		stop()
	}()
	w := q.NewWorker(queue.WorkerConfig{Types: []string{"email"}})
	queue.Handle(w, handler)
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// failedOnce is a listener that closes the returned channel at the first
// EventFailed, printing whether the failure was permanent.
func failedOnce() (queue.Option, <-chan struct{}) {
	ch := make(chan struct{})
	var once atomic.Bool
	return queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventFailed && once.CompareAndSwap(false, true) {
			fmt.Println("failed event, permanent:", ev.Permanent)
			close(ch)
		}
	}), ch
}

// Permanent fails a job for good: no retry, whatever attempts are left.
func ExamplePermanent() {
	ctx := context.Background()
	listener, failed := failedOnce()
	q, _, done := openExampleQueue(listener)
	defer done()
	id, err := q.Enqueue(ctx, SendEmail{To: "not an address"}, queue.Type("email"))
	if err != nil {
		log.Fatal(err)
	}

	runUntilFailed(q, failed, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		return queue.Permanent(fmt.Errorf("bad address %q", job.Args.To))
	})

	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Attempts, "of", job.MaxAttempts)
	fmt.Println(job.Error)
	// Output:
	// failed event, permanent: true
	// failed 1 of 3
	// bad address "not an address"
}

// RetryAfter fails an attempt and asks for the next one after a given
// delay instead of the policy's backoff (a rate limit's Retry-After, say).
func ExampleRetryAfter() {
	ctx := context.Background()
	listener, failed := failedOnce()
	q, _, done := openExampleQueue(listener)
	defer done()
	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}, queue.Type("email"))
	if err != nil {
		log.Fatal(err)
	}

	runUntilFailed(q, failed, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		return queue.RetryAfter(2*time.Hour, errors.New("rate limited"))
	})

	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Attempts, job.Error)
	fmt.Println("next attempt in:", time.Until(job.ScheduledAt).Round(time.Hour))
	// Output:
	// failed event, permanent: false
	// pending 1 rate limited
	// next attempt in: 2h0m0s
}
