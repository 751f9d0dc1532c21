package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the SQLite driver; pgx's stdlib and go-sql-driver/mysql work the same way

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// SendEmail is a job's args: Kind names the job (the name column, which
// picks the handler) and the fields are its JSON payload.
type SendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// Kind names the job.
func (SendEmail) Kind() string { return "send_email" }

// Example shows the whole Go API in one go: install the table, enqueue a
// typed job, and run a worker with a typed handler until its context ends.
func Example() {
	ctx := context.Background()

	// Any *sql.DB of pgx (postgres), go-sql-driver/mysql or modernc.org/sqlite.
	dir, err := os.MkdirTemp("", "jobqueue-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// Create the table (idempotent: run it on every deploy).
	if err := migrations.Install(ctx, db, "jobs"); err != nil {
		log.Fatal(err)
	}

	q, err := queue.New(db, queue.WithTable("jobs"), queue.WithRetryPolicy(queue.RetryPolicy{
		MaxAttempts: 5, BaseDelay: time.Minute, MaxDelay: time.Hour}))
	if err != nil {
		log.Fatal(err)
	}

	// Producers enqueue typed args; options set the queue (type), a time,
	// a deadline or a retry policy.
	if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Welcome"}, queue.Type("email")); err != nil {
		log.Fatal(err)
	}

	// A worker runs typed handlers for the types it serves. Returning an
	// error retries the job with backoff; queue.Permanent(err) fails it
	// for good.
	w := q.NewWorker(queue.WorkerConfig{Types: []string{"email"}, Concurrency: 10})
	ctx, stop := context.WithCancel(ctx) // in a service: signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		fmt.Printf("sending %q to %s (attempt %d)\n", job.Args.Subject, job.Args.To, job.Attempts)
		stop() // the example stops after one job; Run lets it finish first
		return nil
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
	// sending "Welcome" to ada@example.com (attempt 1)
	// completed: 1
}
