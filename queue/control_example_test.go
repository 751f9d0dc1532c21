package queue_test

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

// exampleQueue opens a queue on a new SQLite database in a temp dir; the
// returned func removes it.
func exampleQueue(ctx context.Context) (*queue.Queue, func()) {
	dir, err := os.MkdirTemp("", "jobqueue-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	if err := migrations.Install(ctx, db, "jobs"); err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(db, queue.WithTable("jobs"))
	if err != nil {
		log.Fatal(err)
	}
	return q, func() { q.Close(); db.Close(); os.RemoveAll(dir) }
}

// ExampleQueue_Cancel stops a job and runs it again with Retry; a finished
// job cannot be cancelled, and a missing one is told apart.
func ExampleQueue_Cancel() {
	ctx := context.Background()
	q, done := exampleQueue(ctx)
	defer done()

	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"})
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Cancel(ctx, id); err != nil {
		log.Fatal(err)
	}
	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Error)

	// Cancelling it again: it has finished (failed) already.
	err = q.Cancel(ctx, id)
	fmt.Println(errors.Is(err, queue.ErrJobFinished))

	// Retry runs a cancelled job again.
	ok, err := q.Retry(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried:", ok)

	// The bulk form gives a result per id.
	res, err := q.CancelMany(ctx, []int64{id, 999})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		fmt.Println(r.ID, r.Err == nil, errors.Is(r.Err, queue.ErrJobNotFound))
	}
	// Output:
	// failed cancelled
	// true
	// retried: true
	// 1 true false
	// 999 false true
}

// ExampleQueue_Delete removes jobs that are not running.
func ExampleQueue_Delete() {
	ctx := context.Background()
	q, done := exampleQueue(ctx)
	defer done()

	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"})
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Delete(ctx, id); err != nil {
		log.Fatal(err)
	}
	_, err = q.Get(ctx, id)
	fmt.Println(errors.Is(err, queue.ErrJobNotFound))
	// Output:
	// true
}

// ExampleQueue_RetryMany runs failed jobs again, a result per id: a
// job that is not failed or expired, or a missing id, is told apart.
func ExampleQueue_RetryMany() {
	ctx := context.Background()
	q, done := exampleQueue(ctx)
	defer done()

	var ids []int64
	for _, to := range []string{"ada@example.com", "grace@example.com"} {
		id, err := q.Enqueue(ctx, SendEmail{To: to})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := q.Cancel(ctx, ids[0]); err != nil { // failed, "cancelled"
		log.Fatal(err)
	}
	res, err := q.RetryMany(ctx, []int64{ids[0], ids[1], 999})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		fmt.Println(r.ID, r.Err == nil, errors.Is(r.Err, queue.ErrNotRetryable), errors.Is(r.Err, queue.ErrJobNotFound))
	}
	// Output:
	// 1 true false false
	// 2 false true false
	// 999 false false true
}

// ExampleUniqueKey enqueues a job once per key: while it is pending or
// running, another enqueue with the key writes nothing and returns the
// existing job's id with an error wrapping ErrDuplicate.
func ExampleUniqueKey() {
	ctx := context.Background()
	q, done := exampleQueue(ctx)
	defer done()

	report := SendEmail{To: "boss@example.com", Subject: "daily report"}
	first, err := q.Enqueue(ctx, report, queue.UniqueKey("report:2030-01-02"))
	if err != nil {
		log.Fatal(err)
	}
	again, err := q.Enqueue(ctx, report, queue.UniqueKey("report:2030-01-02"))
	var dup *queue.DuplicateError
	if errors.As(err, &dup) {
		fmt.Println("duplicate of the first:", again == first, dup.ID == first)
	}

	// UniqueFor keeps the key taken for a period after the enqueue, even
	// once the job has finished.
	if _, err := q.Enqueue(ctx, report, queue.UniqueKey("hourly"), queue.UniqueFor(time.Hour)); err != nil {
		log.Fatal(err)
	}

	// EnqueueMany takes a key per job with WithOptions; duplicates are
	// skipped and not counted.
	n, err := q.EnqueueMany(ctx, []queue.JobArgs{
		queue.WithOptions(report, queue.UniqueKey("report:2030-01-02")), // held: skipped
		queue.WithOptions(report, queue.UniqueKey("report:2030-01-03")),
		SendEmail{To: "ada@example.com"}, // no key
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("written:", n)
	// Output:
	// duplicate of the first: true true
	// written: 2
}

// ExampleQueue_EnqueueManyResults enqueues jobs in bulk and learns, for
// each job with a unique key, whether it was written or was a duplicate,
// and the id of the job that holds its key (a job of the same call
// included). Jobs without a key are written; their ids are not read back.
func ExampleQueue_EnqueueManyResults() {
	ctx := context.Background()
	q, done := exampleQueue(ctx)
	defer done()

	held, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}, queue.UniqueKey("welcome:ada"))
	if err != nil {
		log.Fatal(err)
	}
	res, err := q.EnqueueManyResults(ctx, []queue.JobArgs{
		queue.WithOptions(SendEmail{To: "ada@example.com"}, queue.UniqueKey("welcome:ada")), // held already
		queue.WithOptions(SendEmail{To: "bob@example.com"}, queue.UniqueKey("welcome:bob")),
		queue.WithOptions(SendEmail{To: "bob@example.com"}, queue.UniqueKey("welcome:bob")), // repeated
		SendEmail{To: "all@example.com"}, // no key
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("0: duplicate", res[0].Duplicate, "of the earlier job:", res[0].ID == held)
	fmt.Println("1: duplicate", res[1].Duplicate, "with an id:", res[1].ID > 0)
	fmt.Println("2: duplicate", res[2].Duplicate, "of job 1:", res[2].ID == res[1].ID)
	fmt.Println("3: duplicate", res[3].Duplicate, "id", res[3].ID)
	// Output:
	// 0: duplicate true of the earlier job: true
	// 1: duplicate false with an id: true
	// 2: duplicate true of job 1: true
	// 3: duplicate false id 0
}
