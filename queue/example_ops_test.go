package queue_test

// Examples of the operations on stored jobs (List with paging, Retry,
// Prune), on SQLite in a temp dir (openExampleQueue, example_more_test.go).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jobqueue/jobqueue/queue"
)

// List pages through jobs newest first: each page starts after the last
// (oldest) id of the one before, so pages stay stable while jobs are added.
func ExampleQueue_List() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()
	for i := 0; i < 5; i++ {
		if _, err := q.Enqueue(ctx, SendEmail{To: fmt.Sprintf("user%d@example.com", i)}, queue.Type("email")); err != nil {
			log.Fatal(err)
		}
	}

	f := queue.ListFilter{Status: queue.StatusPending, Type: "email", Limit: 2}
	for {
		page, err := q.List(ctx, f)
		if err != nil {
			log.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		var ids []int64
		for _, job := range page {
			ids = append(ids, job.ID)
		}
		fmt.Println(ids)
		f.AfterID = page[len(page)-1].ID
	}
	// Output:
	// [5 4]
	// [3 2]
	// [1]
}

// Retry puts a failed (or expired) job back to pending with its attempts
// reset; any other job is left alone and Retry reports false.
func ExampleQueue_Retry() {
	ctx := context.Background()
	listener, failed := failedOnce()
	q, _, done := openExampleQueue(listener)
	defer done()
	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}, queue.Type("email"))
	if err != nil {
		log.Fatal(err)
	}
	runUntilFailed(q, failed, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		return queue.Permanent(errors.New("mail server down"))
	})

	ok, err := q.Retry(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried:", ok, job.Status, job.Attempts, job.Error == "")

	ok, err = q.Retry(ctx, id) // pending now: nothing to retry
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried again:", ok)
	// Output:
	// failed event, permanent: true
	// retried: true pending 0 true
	// retried again: false
}

// Prune deletes finished jobs (completed, failed, expired) older than a
// given age, in bounded batches; pending and running jobs stay.
func ExampleQueue_Prune() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	q, _, done := openExampleQueue(queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventCompleted {
			stop()
		}
	}))
	defer done()
	if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}, queue.Type("email")); err != nil {
		log.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, SendEmail{To: "bob@example.com"}, queue.Type("later"), queue.Delay(time.Hour)); err != nil {
		log.Fatal(err)
	}
	w := q.NewWorker(queue.WorkerConfig{Types: []string{"email"}})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error { return nil })
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	ctx = context.Background()
	n, err := q.Prune(ctx, 30*24*time.Hour) // finished more than 30 days ago
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pruned after 30 days:", n)
	n, err = q.Prune(ctx, 0) // every finished job
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pruned now:", n)
	stats, err := q.Stats(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", stats[queue.StatusPending], "pending")
	// Output:
	// pruned after 30 days: 0
	// pruned now: 1
	// left: 1 pending
}
