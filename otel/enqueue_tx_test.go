package jobqueueotel_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// TestEnqueueTxCountedApart: jobs written in the caller's transaction are
// counted in jobqueue.jobs.enqueued under in_tx=true (when written: a
// *sql.Tx tells no one of its commit), those the queue committed itself
// under in_tx=false, which then equals the rows they left. Here an
// EnqueueTx whose transaction rolls back, an EnqueueManyTx of 2 that
// commits and an Enqueue: in_tx=true 3 (the rolled-back job among them),
// in_tx=false 1. Before, all four were jobqueue.jobs.enqueued{type=mail}
// 4 against 3 rows, the rolled-back job counted as any other.
func TestEnqueueTxCountedApart(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		rec := newRecorded(t)
		q, _ := openQueue(t, e, rec.tel.QueueOptions()...)

		tx, err := e.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueTx(ctx, tx, task{"ok"}, queue.Type("mail")); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		tx, err = e.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueManyTx(ctx, tx, []queue.JobArgs{task{"ok"}, task{"ok"}}, queue.Type("mail")); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, task{"ok"}, queue.Type("mail")); err != nil {
			t.Fatal(err)
		}

		stats, err := q.Stats(ctx, "mail")
		if err != nil {
			t.Fatal(err)
		}
		if stats[queue.StatusPending] != 3 {
			t.Fatalf("%d pending jobs, want 3 (the rolled-back one not written)", stats[queue.StatusPending])
		}
		want := map[string]int64{"in_tx=false,type=mail": 1, "in_tx=true,type=mail": 3}
		if diff := cmp.Diff(want, rec.collect(t)[jobqueueotel.MetricEnqueued]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", jobqueueotel.MetricEnqueued, diff)
		}
	})
}
