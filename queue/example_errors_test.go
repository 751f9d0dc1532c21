package queue_test

// Examples of opening a queue and of the errors callers test with
// errors.Is, on SQLite in a temp dir.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// New opens the queue of an installed table; the engine is found from the
// *sql.DB's driver. It refuses a bad table name before any SQL runs, and a
// missing or outdated table with an error that says what to run.
func ExampleNew() {
	ctx := context.Background()
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

	_, err = queue.New(db, queue.WithTable("jobs"))
	fmt.Println(errors.Is(err, queue.ErrTableMissing))
	fmt.Println(err)

	_, err = queue.New(db, queue.WithTable("jobs; DROP TABLE users"))
	fmt.Println(errors.Is(err, queue.ErrInvalidTableName))

	if err := migrations.Install(ctx, db, "jobs"); err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(db,
		queue.WithTable("jobs"),
		queue.WithRetryPolicy(queue.RetryPolicy{MaxAttempts: 5, BaseDelay: 10 * time.Second, MaxDelay: time.Hour}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close() // wakes other processes' workers for the last enqueues; leaves db open
	fmt.Println(q.Engine(), q.Table())
	// Output:
	// true
	// jobqueue: table missing: sqlite table "jobs" does not exist; create it with migrations.Install(ctx, db, "jobs") or `jobqueue install --table jobs`
	// true
	// sqlite jobs
}

// ExampleNewContext opens a queue under the caller's context: its end or
// deadline bounds the checks of the table (New allows them 30 seconds).
func ExampleNewContext() {
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := migrations.Install(ctx, db, "jobs"); err != nil {
		log.Fatal(err)
	}
	q, err := queue.NewContext(ctx, db, queue.WithTable("jobs"))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	fmt.Println(q.Engine(), q.Table())

	ended, stop := context.WithCancel(context.Background())
	stop()
	_, err = queue.NewContext(ended, db, queue.WithTable("jobs"))
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// sqlite jobs
	// true
}

// unencodable has a field encoding/json cannot encode.
type unencodable struct {
	C chan int `json:"c"`
}

// Kind names the job.
func (unencodable) Kind() string { return "unencodable" }

// Every error of the API wraps one of the package's Err values, for
// errors.Is; its text says what was wrong and what to do. Bad input is
// refused before anything is written.
func Example_errors() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()

	_, err := q.Enqueue(ctx, queue.RawArgs{Name: ""})
	fmt.Println("empty kind:", errors.Is(err, queue.ErrInvalidJob))

	_, err = q.Enqueue(ctx, SendEmail{}, queue.At(time.Now().Add(time.Hour)), queue.ExpiresIn(time.Minute))
	fmt.Println("deadline before its time:", errors.Is(err, queue.ErrInvalidJob))

	_, err = q.Enqueue(ctx, unencodable{C: make(chan int)})
	fmt.Println("args that do not encode:", errors.Is(err, queue.ErrPayloadRejected))

	_, err = q.Enqueue(ctx, SendEmail{}, queue.Policy(queue.RetryPolicy{MaxAttempts: 0, BaseDelay: time.Second, MaxDelay: time.Second}))
	fmt.Println("zero attempts:", errors.Is(err, queue.ErrInvalidPolicy))

	_, err = q.List(ctx, queue.ListFilter{Status: "done"})
	fmt.Println("unknown status:", errors.Is(err, queue.ErrInvalidFilter))

	_, err = q.Get(ctx, 7)
	fmt.Println("no such job:", errors.Is(err, queue.ErrJobNotFound))

	id, err := q.Enqueue(ctx, SendEmail{}, queue.UniqueKey("welcome:ada"))
	if err != nil {
		log.Fatal(err)
	}
	again, err := q.Enqueue(ctx, SendEmail{}, queue.UniqueKey("welcome:ada"))
	fmt.Println("duplicate:", errors.Is(err, queue.ErrDuplicate), again == id)

	stats, err := q.Stats(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs written:", stats[queue.StatusPending])
	// Output:
	// empty kind: true
	// deadline before its time: true
	// args that do not encode: true
	// zero attempts: true
	// unknown status: true
	// no such job: true
	// duplicate: true true
	// jobs written: 1
}

// A retry policy: after attempt n fails, the job waits min(BaseDelay ×
// 2^(n−1), MaxDelay). Validate refuses a policy the table cannot store.
func ExampleRetryPolicy() {
	p := queue.RetryPolicy{MaxAttempts: 6, BaseDelay: 30 * time.Second, MaxDelay: 5 * time.Minute}
	if err := p.Validate(); err != nil {
		log.Fatal(err)
	}
	wait := p.BaseDelay
	for n := 1; n < p.MaxAttempts; n++ {
		fmt.Printf("after attempt %d fails: wait %v\n", n, min(wait, p.MaxDelay))
		wait *= 2
	}
	fmt.Println("default:", queue.DefaultRetryPolicy())

	err := queue.RetryPolicy{MaxAttempts: 3, BaseDelay: 1500 * time.Millisecond, MaxDelay: time.Minute}.Validate()
	fmt.Println(errors.Is(err, queue.ErrInvalidPolicy))
	// Output:
	// after attempt 1 fails: wait 30s
	// after attempt 2 fails: wait 1m0s
	// after attempt 3 fails: wait 2m0s
	// after attempt 4 fails: wait 4m0s
	// after attempt 5 fails: wait 5m0s
	// default: {3 1m0s 1h0m0s}
	// true
}

// UniqueFor keeps a unique key taken for a period after the enqueue, even
// once its job has finished: at most one job per key and period (a
// reminder a day, say). Without it the key is free again as soon as the
// job has finished.
func ExampleUniqueFor() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()

	remind := func(key string, opts ...queue.EnqueueOption) {
		opts = append(opts, queue.UniqueKey(key))
		id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Reminder"}, opts...)
		switch {
		case errors.Is(err, queue.ErrDuplicate):
			fmt.Printf("%s: duplicate of job %d\n", key, id)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("%s: new job\n", key)
		}
	}
	remind("daily", queue.UniqueFor(24*time.Hour))
	remind("plain")
	// Both jobs finish (cancelled here; completed or failed alike).
	for _, id := range []int64{1, 2} {
		if err := q.Cancel(ctx, id); err != nil {
			log.Fatal(err)
		}
	}
	remind("daily", queue.UniqueFor(24*time.Hour)) // still taken for a day
	remind("plain")                                // free again
	// Output:
	// daily: new job
	// plain: new job
	// daily: duplicate of job 1
	// plain: new job
}
