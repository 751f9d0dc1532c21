package jobqueueotel_test

// An attempt whose worker was alive but late, ended by a Reclaim, whose
// job was then cancelled (pending again after the Reclaim) before its
// handler returned.

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// TestLateAttemptThenCancelCountedOnce: a worker's attempt whose lease
// passed while its handler ran is ended by a Reclaim (the job is pending
// again, counted lost there); the job is then cancelled (a pending job:
// no attempt ends) and the handler returns. The attempt is counted once,
// lost, and its duration recorded under lost. Before, the worker took the
// cancelled row (failed, "cancelled", its attempts unchanged) for a cancel
// of its own attempt and counted it again, as cancelled: two ends of one
// attempt.
func TestLateAttemptThenCancelCountedOnce(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		rec := newRecorded(t)
		q, tbl := openQueue(t, e, rec.tel.QueueOptions()...)
		id, err := q.Enqueue(ctx, task{"late"}, queue.Type("mail"))
		if err != nil {
			t.Fatal(err)
		}
		w := q.NewWorker(queue.WorkerConfig{Concurrency: 1, MaxJobs: 1, Lease: 30 * time.Second, MaintenanceInterval: -1})
		queue.Handle(w, func(context.Context, *queue.Job[task]) error {
			// Late: whatever the heartbeat says, the handler goes on.
			if err := reclaimPassedLease(ctx, e, tbl, q, id); err != nil {
				return err
			}
			if err := q.Cancel(ctx, id); err != nil {
				return err
			}
			return nil
		})
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
		row, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if row.Status != queue.StatusFailed || row.Error != "cancelled" || row.Attempts != 1 {
			t.Fatalf("job %d is %s %q after %d attempts, want failed \"cancelled\" after 1 (the handler's Reclaim or Cancel did not happen)",
				id, row.Status, row.Error, row.Attempts)
		}

		got := rec.collect(t)
		if diff := cmp.Diff(map[string]int64{"outcome=lost,type=mail": 1}, got[jobqueueotel.MetricWorked]); diff != "" {
			t.Errorf("%s: the one attempt counted once, lost, by the Reclaim that ended it (-want +got):\n%s", jobqueueotel.MetricWorked, diff)
		}
		if diff := cmp.Diff(map[string]int64{"outcome=lost,type=mail": 1}, got[jobqueueotel.MetricDuration]); diff != "" {
			t.Errorf("%s: the late handler's duration, under lost (-want +got):\n%s", jobqueueotel.MetricDuration, diff)
		}
	})
}
