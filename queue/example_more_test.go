package queue_test

// Examples of each public capability, on SQLite in a temp dir. The code is
// the same on PostgreSQL and MySQL/MariaDB: only the *sql.DB differs.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// openExampleQueue opens a queue on the table "jobs" of a new SQLite
// database in a temp dir, installing the table first, and returns it with
// a func that closes and removes everything. Any *sql.DB of pgx,
// go-sql-driver/mysql or modernc.org/sqlite works the same way.
func openExampleQueue(opts ...queue.Option) (*queue.Queue, *sql.DB, func()) {
	dir, err := os.MkdirTemp("", "jobqueue-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	if err := migrations.Install(context.Background(), db, "jobs"); err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(db, append([]queue.Option{queue.WithTable("jobs")}, opts...)...)
	if err != nil {
		log.Fatal(err)
	}
	return q, db, func() {
		q.Close()
		db.Close()
		os.RemoveAll(dir)
	}
}

// Enqueue options: the queue (type) a job belongs to, when it may run
// first, a deadline after which it expires instead of running, and its own
// retry policy.
func ExampleQueue_Enqueue() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()

	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Reminder"},
		queue.Type("email"),           // default: "default"
		queue.Delay(time.Hour),        // or queue.At(t); default: now
		queue.ExpiresIn(24*time.Hour), // or queue.ExpiresAt(t); default: never
		queue.Policy(queue.RetryPolicy{MaxAttempts: 10, BaseDelay: time.Second, MaxDelay: time.Minute}),
	)
	if err != nil {
		log.Fatal(err)
	}
	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.ID, job.Name, job.Type, job.Status, string(job.Payload))
	fmt.Println("runs after:", job.ScheduledAt.Sub(job.CreatedAt))
	fmt.Println("expires after:", job.ExpiresAt.Sub(job.CreatedAt))
	fmt.Println("policy:", job.MaxAttempts, job.BaseDelay, job.MaxDelay)

	// Bad input is refused before anything is written.
	_, err = q.Enqueue(ctx, SendEmail{}, queue.Delay(time.Hour), queue.ExpiresIn(time.Minute))
	fmt.Println("refused:", err != nil)
	// Output:
	// 1 send_email email pending {"to":"ada@example.com","subject":"Reminder"}
	// runs after: 1h0m0s
	// expires after: 24h0m0s
	// policy: 10 1s 1m0s
	// refused: true
}

// accountsDDL creates the application's own table, written in the same
// transaction as a job in ExampleQueue_EnqueueTx.
const accountsDDL = "CREATE TABLE accounts (id INTEGER PRIMARY KEY, email TEXT NOT NULL)"

// EnqueueTx enqueues inside the caller's transaction: the job exists if and
// only if the transaction commits.
func ExampleQueue_EnqueueTx() {
	ctx := context.Background()
	q, db, done := openExampleQueue()
	defer done()
	if _, err := db.ExecContext(ctx, accountsDDL); err != nil {
		log.Fatal(err)
	}

	signUp := func(email string, commit bool) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		defer tx.Rollback() // a no-op after Commit
		if _, err := tx.ExecContext(ctx, "INSERT INTO accounts (email) VALUES (?)", email); err != nil {
			log.Fatal(err)
		}
		if _, err := q.EnqueueTx(ctx, tx, SendEmail{To: email, Subject: "Welcome"}, queue.Type("email")); err != nil {
			log.Fatal(err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				log.Fatal(err)
			}
		}
	}
	signUp("ada@example.com", true)
	signUp("bob@example.com", false) // rolled back: no account, no email

	stats, err := q.Stats(ctx, "email")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending emails:", stats[queue.StatusPending])
	// Output:
	// pending emails: 1
}

// EnqueueMany writes many jobs in multi-row statements: all of them or, on
// bad input, none.
func ExampleQueue_EnqueueMany() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()

	jobs := []queue.JobArgs{
		SendEmail{To: "ada@example.com", Subject: "News"},
		SendEmail{To: "bob@example.com", Subject: "News"},
		SendEmail{To: "eve@example.com", Subject: "News"},
	}
	n, err := q.EnqueueMany(ctx, jobs, queue.Type("newsletter"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enqueued:", n)

	// One bad job (a type longer than 64 characters is refused for all)
	// and nothing is written.
	_, err = q.EnqueueMany(ctx, jobs, queue.Type(fmt.Sprintf("%065d", 0)))
	fmt.Println("refused:", err != nil)

	stats, err := q.Stats(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending:", stats[queue.StatusPending])
	// Output:
	// enqueued: 3
	// refused: true
	// pending: 3
}

// A typed worker: Handle registers a handler for one kind of job, with its
// args decoded; Run claims and runs jobs until its context ends, letting
// running handlers finish. Here a listener stops the worker once both jobs
// are completed.
func ExampleHandle() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var completed atomic.Int32
	q, _, done := openExampleQueue(queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventCompleted && completed.Add(1) == 2 {
			stop()
		}
	}))
	defer done()
	for _, to := range []string{"ada@example.com", "bob@example.com"} {
		if _, err := q.Enqueue(ctx, SendEmail{To: to, Subject: "Hello"}, queue.Type("email")); err != nil {
			log.Fatal(err)
		}
	}

	w := q.NewWorker(queue.WorkerConfig{Types: []string{"email"}, Concurrency: 1})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		fmt.Printf("job %d: %q to %s\n", job.ID, job.Args.Subject, job.Args.To)
		return nil // nil completes the job; an error retries it with backoff
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	stats, err := q.Stats(context.Background(), "email")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("completed:", stats[queue.StatusCompleted])
	// Output:
	// job 1: "Hello" to ada@example.com
	// job 2: "Hello" to bob@example.com
	// completed: 2
}

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
