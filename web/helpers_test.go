package web_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// Jobs of the tests.
type sendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func (sendEmail) Kind() string { return "send_email" }

type resizeImage struct {
	Path  string `json:"path"`
	Width int    `json:"width"`
}

func (resizeImage) Kind() string { return "resize_image" }

type buildReport struct {
	Month string `json:"month"`
}

func (buildReport) Kind() string { return "build_report" }

type cleanup struct{}

func (cleanup) Kind() string { return "cleanup" }

// newQueue installs a table (a fresh one when table is not given) on the
// env's database and opens a queue on it, closed when t ends.
func newQueue(t testing.TB, e *testdb.Env, table ...string) *queue.Queue {
	t.Helper()
	var name string
	if len(table) > 0 {
		name = table[0]
	} else {
		name = e.Table(t)
	}
	if err := migrations.Install(context.Background(), e.DB, name); err != nil {
		t.Fatalf("install %s: %v", name, err)
	}
	q, err := queue.New(e.DB, queue.WithTable(name), queue.WithLogger(testdb.QuietLogger()))
	if err != nil {
		t.Fatalf("queue.New: %v", err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("closing the queue: %v", err)
		}
	})
	return q
}

// seeded is what seed put in the table.
type seeded struct {
	pending   []int64 // send_email, type email: due, due, in an hour
	failed    []int64 // resize_image, type images
	completed int64   // build_report, type reports
	expired   int64   // cleanup, type maintenance
}

// seed fills the table: 3 pending emails (one not yet due), 2 failed image
// jobs, 1 completed report and 1 expired cleanup, through a real worker.
func seed(t testing.TB, q *queue.Queue) seeded {
	t.Helper()
	ctx := context.Background()
	var s seeded
	now := time.Now().UTC()
	enq := func(args queue.JobArgs, opts ...queue.EnqueueOption) int64 {
		t.Helper()
		id, err := q.Enqueue(ctx, args, opts...)
		if err != nil {
			t.Fatalf("enqueue %T: %v", args, err)
		}
		return id
	}
	s.pending = append(s.pending,
		enq(sendEmail{To: "ada@example.com", Subject: "Welcome"}, queue.Type("email"), queue.At(now.Add(-time.Hour))),
		enq(sendEmail{To: "grace@example.com", Subject: "Invoice <42>"}, queue.Type("email")),
		enq(sendEmail{To: "linus@example.com", Subject: "Later"}, queue.Type("email"), queue.At(now.Add(time.Hour))),
	)
	once := queue.Policy(queue.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second})
	s.failed = append(s.failed,
		enq(resizeImage{Path: "/img/cat.png", Width: 640}, queue.Type("images"), once),
		enq(resizeImage{Path: "/img/dog.png", Width: 320}, queue.Type("images"), once),
	)
	s.completed = enq(buildReport{Month: "2026-11"}, queue.Type("reports"))
	s.expired = enq(cleanup{}, queue.Type("maintenance"), queue.At(now.Add(-2*time.Hour)), queue.ExpiresAt(now.Add(-time.Hour)))
	if n, err := q.ExpireOverdue(ctx); err != nil || n != 1 {
		t.Fatalf("ExpireOverdue = %d, %v; want 1", n, err)
	}

	w := q.NewWorker(queue.WorkerConfig{Types: []string{"images", "reports"}, Concurrency: 1, MaxJobs: 3,
		PollInterval: 50 * time.Millisecond, MaintenanceInterval: -1})
	queue.Handle(w, func(ctx context.Context, j *queue.Job[resizeImage]) error {
		return errors.New("cannot open " + j.Args.Path + ": no such file or directory")
	})
	queue.Handle(w, func(ctx context.Context, j *queue.Job[buildReport]) error { return nil })
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := w.Run(rctx); err != nil {
		t.Fatalf("worker: %v", err)
	}
	for _, id := range append(append([]int64{}, s.failed...), s.completed) {
		j, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := queue.StatusFailed
		if id == s.completed {
			want = queue.StatusCompleted
		}
		if j.Status != want {
			t.Fatalf("seeded job %d is %s, want %s", id, j.Status, want)
		}
	}
	return s
}
