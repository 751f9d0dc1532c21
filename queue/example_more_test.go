package queue_test

// Examples of each public capability, on SQLite in a temp dir. The code is
// the same on PostgreSQL and MySQL/MariaDB: only the *sql.DB differs. This
// file opens the examples' queue and shows enqueueing and a typed worker;
// example_fail_test.go shows failing jobs, example_ops_test.go the
// operations on stored jobs.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
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

// WithOptions gives one job of EnqueueMany options of its own, applied
// after the call's: here one email goes to another queue and one waits an
// hour; the call's options hold for the rest.
func ExampleWithOptions() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()

	jobs := []queue.JobArgs{
		SendEmail{To: "ada@example.com", Subject: "News"},
		queue.WithOptions(SendEmail{To: "bob@example.com", Subject: "News"}, queue.Type("vip")),
		queue.WithOptions(SendEmail{To: "eve@example.com", Subject: "News"}, queue.Delay(time.Hour)),
	}
	if _, err := q.EnqueueMany(ctx, jobs, queue.Type("newsletter")); err != nil {
		log.Fatal(err)
	}
	list, err := q.List(ctx, queue.ListFilter{})
	if err != nil {
		log.Fatal(err)
	}
	for i := len(list) - 1; i >= 0; i-- { // List gives the newest first
		j := list[i]
		fmt.Println(j.ID, j.Type, "waits:", j.ScheduledAt.Sub(j.CreatedAt))
	}
	// Output:
	// 1 newsletter waits: 0s
	// 2 vip waits: 0s
	// 3 newsletter waits: 1h0m0s
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

// strictCodec decodes payloads strictly: a field the args do not have is an
// error, so a producer's typo fails the job instead of being dropped.
type strictCodec struct{ queue.JSONCodec }

func (strictCodec) Unmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// WithCodec sets how args become payloads and back (the payload stays
// JSON). A payload the handler's args cannot take fails its job for good,
// with the codec's error.
func ExampleWithCodec() {
	ctx := context.Background()
	q, _, done := openExampleQueue(queue.WithCodec(strictCodec{}))
	defer done()

	good, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Hi"})
	if err != nil {
		log.Fatal(err)
	}
	// Another producer's job of the same kind, with a field SendEmail lacks.
	typo, err := q.Enqueue(ctx, queue.RawArgs{Name: "send_email", Payload: json.RawMessage(`{"to":"bob@example.com","subjcet":"Hi"}`)})
	if err != nil {
		log.Fatal(err)
	}

	w := q.NewWorker(queue.WorkerConfig{Concurrency: 1, MaxJobs: 2})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		fmt.Println("sent to", job.Args.To)
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	for _, id := range []int64{good, typo} {
		job, err := q.Get(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(job.ID, job.Status, strings.Contains(job.Error, `unknown field "subjcet"`))
	}
	// Output:
	// sent to ada@example.com
	// 1 completed false
	// 2 failed true
}

// WithDeleteOnSuccess deletes a job's row when it completes, for tables
// that should keep only what needs attention; failed jobs stay.
func ExampleWithDeleteOnSuccess() {
	ctx := context.Background()
	q, _, done := openExampleQueue(queue.WithDeleteOnSuccess(true))
	defer done()

	for _, to := range []string{"ada@example.com", "not-an-address"} {
		if _, err := q.Enqueue(ctx, SendEmail{To: to}); err != nil {
			log.Fatal(err)
		}
	}
	w := q.NewWorker(queue.WorkerConfig{Concurrency: 1, MaxJobs: 2})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		if !strings.Contains(job.Args.To, "@") {
			return queue.Permanent(fmt.Errorf("invalid address %q", job.Args.To))
		}
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	_, err := q.Get(ctx, 1)
	fmt.Println("job 1:", errors.Is(err, queue.ErrJobNotFound))
	job, err := q.Get(ctx, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job 2:", job.Status, job.Error)
	// Output:
	// job 1: true
	// job 2: failed invalid address "not-an-address"
}

// HandleDefault runs the jobs of kinds that have no typed handler, with
// the row as stored. Here a producer without the Go types (another
// language, the command line) enqueues raw JSON with RawArgs, and the
// catch-all forwards each job by its kind; a job of a kind with a typed
// handler still goes to that handler.
func ExampleWorker_HandleDefault() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var completed atomic.Int32
	q, _, done := openExampleQueue(queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventCompleted && completed.Add(1) == 3 {
			stop()
		}
	}))
	defer done()
	for _, args := range []queue.JobArgs{
		queue.RawArgs{Name: "resize_image", Payload: json.RawMessage(`{"path":"a.png","width":64}`)},
		queue.RawArgs{Name: "index_page", Payload: json.RawMessage(`{"url":"https://example.com"}`)},
		SendEmail{To: "ada@example.com", Subject: "Hello"},
	} {
		if _, err := q.Enqueue(ctx, args); err != nil {
			log.Fatal(err)
		}
	}

	w := q.NewWorker(queue.WorkerConfig{Concurrency: 1})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		fmt.Printf("job %d: typed %s to %s\n", job.ID, job.Name, job.Args.To)
		return nil
	})
	w.HandleDefault(func(ctx context.Context, job *queue.JobRow) error {
		fmt.Printf("job %d: catch-all %s %s\n", job.ID, job.Name, job.Payload)
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// job 1: catch-all resize_image {"path":"a.png","width":64}
	// job 2: catch-all index_page {"url":"https://example.com"}
	// job 3: typed send_email to ada@example.com
}
