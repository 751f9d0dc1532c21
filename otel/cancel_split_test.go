package jobqueueotel_test

// Cancelled attempts are counted once in jobqueue.jobs.worked, split by
// their lease at the cancel: the worker counts those whose lease ran, the
// process whose Cancel ended them those whose lease had passed (their
// worker presumed dead).

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// TestCancelledAttemptCountedOnceAcrossProcesses: two queues on one table,
// each with its own telemetry, stand for a worker's process and the
// process that cancels (a service, the dashboard).
//   - live: the worker runs the job, its lease running, when it is
//     cancelled: the worker counts it, the canceller nothing (as before).
//   - dead: the job's attempt was claimed by a worker that died (the row
//     in_progress, its lease passed, Reclaim not run yet) when it is
//     cancelled: the canceller counts it. Before, no one did: no worker
//     was alive to, and Cancel counted nothing.
func TestCancelledAttemptCountedOnceAcrossProcesses(t *testing.T) {
	cases := []struct {
		name                string
		live                bool
		wantWorker, wantCnc map[string]int64 // MetricWorked of each process
	}{
		{name: "live", live: true, wantWorker: map[string]int64{"outcome=cancelled,type=mail": 1}},
		{name: "dead", live: false, wantCnc: map[string]int64{"outcome=cancelled,type=mail": 1}},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				worker, canceller := newRecorded(t), newRecorded(t)
				wq, tbl := openQueue(t, e, worker.tel.QueueOptions()...)
				cq, err := queue.New(e.DB, append([]queue.Option{queue.WithTable(tbl.Name), queue.WithLogger(testdb.QuietLogger())}, canceller.tel.QueueOptions()...)...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := cq.Close(); err != nil {
						t.Errorf("closing the canceller's queue: %v", err)
					}
				})
				id, err := wq.Enqueue(ctx, task{tc.name}, queue.Type("mail"))
				if err != nil {
					t.Fatal(err)
				}
				if tc.live {
					w := wq.NewWorker(queue.WorkerConfig{Concurrency: 1, MaxJobs: 1, Lease: 3 * time.Second, MaintenanceInterval: -1})
					queue.Handle(w, func(ctx context.Context, job *queue.Job[task]) error {
						if err := cq.Cancel(ctx, job.ID); err != nil {
							return err
						}
						<-ctx.Done() // the heartbeat (on PostgreSQL the NOTIFY) ends it
						return context.Cause(ctx)
					})
					if err := w.Run(ctx); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := claimByDeadWorker(ctx, e, tbl, id); err != nil {
						t.Fatal(err)
					}
					if err := cq.Cancel(ctx, id); err != nil {
						t.Fatal(err)
					}
				}
				row, err := cq.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if row.Status != queue.StatusFailed || row.Error != "cancelled" || row.Attempts != 1 {
					t.Fatalf("job %d is %s %q after %d attempts, want failed \"cancelled\" after 1", id, row.Status, row.Error, row.Attempts)
				}
				if diff := cmp.Diff(tc.wantWorker, worker.collect(t)[jobqueueotel.MetricWorked]); diff != "" {
					t.Errorf("%s counted by the worker's process (-want +got):\n%s", jobqueueotel.MetricWorked, diff)
				}
				if diff := cmp.Diff(tc.wantCnc, canceller.collect(t)[jobqueueotel.MetricWorked]); diff != "" {
					t.Errorf("%s counted by the canceller's process (-want +got):\n%s", jobqueueotel.MetricWorked, diff)
				}
			})
		}
	})
}

// claimByDeadWorker writes into job id's row what a claim writes (in
// progress, its first attempt, a claim token) with a lease that passed
// long ago: the claim of a worker process that died with it.
func claimByDeadWorker(ctx context.Context, e *testdb.Env, tbl engine.Table, id int64) error {
	query := "UPDATE " + tbl.Quoted() + " SET status = 'in_progress', attempts = 1, claim_token = 'dead-worker', lease_until = ? WHERE id = ? AND status = 'pending'"
	if e.Kind == engine.Postgres {
		query = "UPDATE " + tbl.Quoted() + " SET status = 'in_progress', attempts = 1, claim_token = 'dead-worker', lease_until = $1 WHERE id = $2 AND status = 'pending'"
	}
	_, err := e.DB.ExecContext(ctx, query, time.Now().UTC().Add(-time.Hour).Truncate(time.Second), id)
	return err
}

// TestListenCountsCancelledOnce is the table of what the listener counts
// of the events of cancelled attempts: the canceller's EventCancelled per
// type, the worker's EventLost unless CountedByCancel (its duration
// recorded either way).
func TestListenCountsCancelledOnce(t *testing.T) {
	row := &queue.JobRow{ID: 1, Name: "task", Type: "mail", Attempts: 1}
	cases := []struct {
		name        string
		ev          queue.Event
		worked, dur map[string]int64
	}{
		{"worker's, lease running", queue.Event{Kind: queue.EventLost, Job: row, Outcome: queue.OutcomeCancelled, Duration: time.Second},
			map[string]int64{"outcome=cancelled,type=mail": 1}, map[string]int64{"outcome=cancelled,type=mail": 1}},
		{"worker's, lease passed", queue.Event{Kind: queue.EventLost, Job: row, Outcome: queue.OutcomeCancelled, CountedByCancel: true, Duration: time.Second},
			nil, map[string]int64{"outcome=cancelled,type=mail": 1}},
		{"canceller's", queue.Event{Kind: queue.EventCancelled, Count: 3, Cancelled: []queue.CancelledCount{{Type: "mail", Count: 2}, {Type: "sms", Count: 1}}},
			map[string]int64{"outcome=cancelled,type=mail": 2, "outcome=cancelled,type=sms": 1}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorded(t)
			rec.tel.Listen(tc.ev)
			got := rec.collect(t)
			if diff := cmp.Diff(tc.worked, got[jobqueueotel.MetricWorked]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", jobqueueotel.MetricWorked, diff)
			}
			if diff := cmp.Diff(tc.dur, got[jobqueueotel.MetricDuration]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", jobqueueotel.MetricDuration, diff)
			}
		})
	}
}
