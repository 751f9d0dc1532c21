package queue_test

// Examples of scheduling, deadlines and the operations on stored jobs that
// example_ops_test.go and control_example_test.go leave out (Get, Stats,
// ExpireOverdue, Reclaim, EnqueueManyTx, cancelling or deleting a running
// job), on SQLite in a temp dir (openExampleQueue, example_more_test.go).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jobqueue/jobqueue/queue"
)

// At schedules a job's first attempt at a given time (Delay: after a given
// wait). Workers do not claim it before then; times are stored in UTC,
// whatever the time zone they are given in.
func ExampleAt() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()

	tokyo := time.FixedZone("JST", 9*60*60)
	newYear := time.Date(2030, 1, 1, 9, 0, 0, 0, tokyo)
	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Happy new year"}, queue.At(newYear))
	if err != nil {
		log.Fatal(err)
	}
	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.ScheduledAt)

	// A worker finds nothing due: MaxRuntime stops it after a moment.
	w := q.NewWorker(queue.WorkerConfig{MaxRuntime: 100 * time.Millisecond})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		fmt.Println("ran too early")
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	stats, err := q.Stats(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("still pending:", stats[queue.StatusPending])
	// Output:
	// pending 2030-01-01 00:00:00 +0000 UTC
	// still pending: 1
}

// ExpiresAt gives a job a deadline: a job not started by then is never
// started. ExpireOverdue, which the leading worker runs on its
// maintenance interval, marks pending jobs past their deadline expired.
func ExampleQueue_ExpireOverdue() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()

	// Due two hours ago with a deadline one hour ago: the workers were
	// down meanwhile, and the job is no use any more.
	now := time.Now()
	late, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Flash sale ends at noon"},
		queue.At(now.Add(-2*time.Hour)), queue.ExpiresAt(now.Add(-time.Hour)))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, SendEmail{To: "bob@example.com"}, queue.ExpiresIn(time.Hour)); err != nil {
		log.Fatal(err)
	}

	n, err := q.ExpireOverdue(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("expired:", n)
	job, err := q.Get(ctx, late)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.ID, job.Status, job.FinishedAt != nil)

	// Retry runs an expired job again, its deadline cleared.
	if _, err := q.Retry(ctx, late); err != nil {
		log.Fatal(err)
	}
	job, err = q.Get(ctx, late)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.ID, job.Status, job.ExpiresAt == nil)
	// Output:
	// expired: 1
	// 1 expired true
	// 1 pending true
}

// Reclaim ends the attempts of workers that vanished (a crash, kill -9, a
// lost network) once their lease has passed: the job runs again, or ends
// failed or expired when it has no attempts or time left. The leading
// worker runs it on its maintenance interval; a listener hears
// EventReclaimed.
func ExampleQueue_Reclaim() {
	ctx := context.Background()
	q, db, done := openExampleQueue(queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventReclaimed {
			fmt.Println("event: reclaimed", ev.Count)
		}
	}))
	defer done()
	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"})
	if err != nil {
		log.Fatal(err)
	}
	// The row as a worker that crashed in the middle of the attempt leaves
	// it: in_progress, its lease passed. (SQLite's time format; only this
	// simulation of a crash is engine-specific.)
	if _, err := db.ExecContext(ctx, `UPDATE jobs SET status = 'in_progress', attempts = 1,
		claim_token = 'crashed-worker', lease_until = '2000-01-01 00:00:00.000000' WHERE id = ?`, id); err != nil {
		log.Fatal(err)
	}

	n, err := q.Reclaim(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reclaimed:", n)
	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Attempts, job.ClaimToken == "", job.Error != "")
	// Output:
	// event: reclaimed 1
	// reclaimed: 1
	// pending 1 true true
}

// Get reads one job; a missing id is an error wrapping ErrJobNotFound.
func ExampleQueue_Get() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()
	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Hi"}, queue.Type("email"))
	if err != nil {
		log.Fatal(err)
	}

	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.ID, job.Name, job.Type, job.Status, job.Attempts, string(job.Payload))

	_, err = q.Get(ctx, 42)
	fmt.Println(errors.Is(err, queue.ErrJobNotFound))
	// Output:
	// 1 send_email email pending 0 {"to":"ada@example.com","subject":"Hi"}
	// true
}

// Stats counts the jobs per status, of one type or of all (""); every
// status is a key, with 0 when there are none.
func ExampleQueue_Stats() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()
	for _, typ := range []string{"email", "email", "sms"} {
		if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}, queue.Type(typ)); err != nil {
			log.Fatal(err)
		}
	}
	if err := q.Cancel(ctx, 1); err != nil {
		log.Fatal(err)
	}

	for _, typ := range []string{"email", ""} {
		stats, err := q.Stats(ctx, typ)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%q:", typ)
		for _, s := range queue.Statuses() {
			fmt.Printf(" %s=%d", s, stats[s])
		}
		fmt.Println()
	}
	// Output:
	// "email": pending=1 in_progress=0 completed=0 failed=1 expired=0
	// "": pending=2 in_progress=0 completed=0 failed=1 expired=0
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction: the jobs
// exist only if it commits.
func ExampleQueue_EnqueueManyTx() {
	ctx := context.Background()
	q, db, done := openExampleQueue()
	defer done()

	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		n, err := q.EnqueueManyTx(ctx, tx, []queue.JobArgs{
			SendEmail{To: "ada@example.com", Subject: "Order shipped"},
			SendEmail{To: "bob@example.com", Subject: "Order shipped"},
		}, queue.Type("email"))
		if err != nil {
			log.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			log.Fatal(err)
		}
		stats, err := q.Stats(ctx, "email")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("written %d, committed %t: pending %d\n", n, commit, stats[queue.StatusPending])
	}
	// Output:
	// written 2, committed false: pending 0
	// written 2, committed true: pending 2
}

// A running job can be cancelled from anywhere: its attempt is fenced off
// (its result changes nothing) and its handler's context is cancelled, with
// a cause wrapping ErrLeaseLost, at the worker's next heartbeat (at once
// on PostgreSQL). Delete refuses a running job with ErrJobRunning: cancel
// it first.
func ExampleQueue_Cancel_running() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()
	id, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Big export"})
	if err != nil {
		log.Fatal(err)
	}

	// A lease of 3 seconds: heartbeats every second.
	w := q.NewWorker(queue.WorkerConfig{Concurrency: 1, MaxJobs: 1, Lease: 3 * time.Second})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		err := q.Delete(ctx, job.ID)
		fmt.Println("delete while running:", errors.Is(err, queue.ErrJobRunning))
		if err := q.Cancel(ctx, job.ID); err != nil {
			return err
		}
		<-ctx.Done() // the long work, until the heartbeat finds the job cancelled
		fmt.Println("handler stopped, lease lost:", errors.Is(context.Cause(ctx), queue.ErrLeaseLost))
		return ctx.Err()
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Error)
	fmt.Println("delete once finished:", q.Delete(ctx, id))
	// Output:
	// delete while running: true
	// handler stopped, lease lost: true
	// failed cancelled
	// delete once finished: <nil>
}

// EnqueueManyResultsTx is EnqueueManyResults in the caller's transaction:
// the keys are taken only if it commits, and within it a duplicate of a job
// it wrote names that job. After a rollback the key is free again.
func ExampleQueue_EnqueueManyResultsTx() {
	ctx := context.Background()
	q, db, done := openExampleQueue()
	defer done()

	jobs := []queue.JobArgs{
		queue.WithOptions(SendEmail{To: "ada@example.com"}, queue.UniqueKey("invoice:42")),
		SendEmail{To: "bob@example.com"}, // no key: written, ID 0
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	first, err := q.EnqueueManyResultsTx(ctx, tx, jobs)
	if err != nil {
		log.Fatal(err)
	}
	again, err := q.EnqueueManyResultsTx(ctx, tx, jobs[:1])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("in the transaction: written", !first[0].Duplicate, "then duplicate", again[0].Duplicate,
		"of it:", again[0].ID == first[0].ID, "no key, ID", first[1].ID)
	if err := tx.Rollback(); err != nil {
		log.Fatal(err)
	}

	after, err := q.EnqueueManyResults(ctx, jobs[:1])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after the rollback: duplicate", after[0].Duplicate)
	// Output:
	// in the transaction: written true then duplicate true of it: true no key, ID 0
	// after the rollback: duplicate false
}
