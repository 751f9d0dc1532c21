package migrations

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

// TestMigratedTableWorksWithQueue: after Migrate the queue runs on the
// table: its counts are right, migrated pending jobs (those that were
// in_progress included) are claimed and run, a migrated failed job and a
// migrated expired job can be retried and then run, and new jobs get new
// ids.
func TestMigratedTableWorksWithQueue(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		k, db := e.Kind, e.DB
		jobs := v1Fixture(k, time.Now().UTC())
		table := v1Table(t, e, jobs)
		if err := Migrate(ctx, db, testPolicy, table); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(db, queue.WithTable(table), queue.WithLogger(testdb.QuietLogger()))
		if err != nil {
			t.Fatalf("queue.New on the migrated table: %v", err)
		}
		defer q.Close()

		// What the migration made of each job (the migration time
		// does not change any status here: deadlines are well past
		// or a day away).
		migrated := map[int64]v2Job{}
		wantStats := map[queue.Status]int64{}
		for _, s := range queue.Statuses() {
			wantStats[s] = 0
		}
		for _, j := range jobs {
			w := expectV2(j, k, testPolicy, time.Now().UTC(), j.Payload)
			migrated[j.ID] = w
			wantStats[queue.Status(w.Status)]++
		}
		stats, err := q.Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantStats, stats); diff != "" {
			t.Errorf("Stats (-want +got):\n%s", diff)
		}

		// Get reads a migrated job with its policy.
		var pendingID, failedID, expiredID int64
		for _, j := range jobs {
			w := migrated[j.ID]
			switch {
			case w.Status == "pending" && j.Status == "in_progress" && pendingID == 0:
				pendingID = j.ID
			case w.Status == "failed" && failedID == 0:
				failedID = j.ID
			case w.Status == "expired" && j.ExpiresAt != nil && expiredID == 0:
				expiredID = j.ID
			}
		}
		row, err := q.Get(ctx, pendingID)
		if err != nil {
			t.Fatal(err)
		}
		w := migrated[pendingID]
		if row.Status != queue.StatusPending || row.Attempts != w.Attempts || row.MaxAttempts != testPolicy.MaxAttempts ||
			row.BaseDelay != testPolicy.BaseDelay || row.MaxDelay != testPolicy.MaxDelay || !jsonEqual(string(row.Payload), w.Payload) {
			t.Errorf("Get(%d) = %+v; want pending, %d attempts, policy %+v, payload %s", pendingID, row, w.Attempts, testPolicy, w.Payload)
		}

		// Retry: the failed and the expired job go back to pending;
		// a pending one is not retried.
		for _, id := range []int64{failedID, expiredID} {
			ok, err := q.Retry(ctx, id)
			if err != nil || !ok {
				t.Fatalf("Retry(%d) = %v, %v; want true", id, ok, err)
			}
			row, err := q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if row.Status != queue.StatusPending || row.Attempts != 0 || row.Error != "" || row.FinishedAt != nil || row.ExpiresAt != nil && id == expiredID {
				t.Errorf("job %d after Retry: %+v", id, row)
			}
		}
		if ok, err := q.Retry(ctx, pendingID); err != nil || ok {
			t.Errorf("Retry of a pending job = %v, %v; want false", ok, err)
		}

		// A new job gets an id above every migrated one.
		newID, err := q.Enqueue(ctx, queue.RawArgs{Name: "after_migration", Payload: json.RawMessage(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if last := jobs[len(jobs)-1].ID; newID <= last {
			t.Errorf("new job id %d, want above %d", newID, last)
		}

		// Migrate installed the side table of unique keys: a keyed job
		// takes its id from the migrated table's own sequence, and a
		// second one with its key is a duplicate.
		keyedID, err := q.Enqueue(ctx, queue.RawArgs{Name: "after_migration", Payload: json.RawMessage(`{"n":2}`)}, queue.UniqueKey("after"))
		if err != nil {
			t.Fatalf("keyed Enqueue on the migrated table: %v", err)
		}
		if keyedID <= newID {
			t.Errorf("keyed job id %d, want above %d", keyedID, newID)
		}
		if dup, err := q.Enqueue(ctx, queue.RawArgs{Name: "after_migration"}, queue.UniqueKey("after")); !errors.Is(err, queue.ErrDuplicate) || dup != keyedID {
			t.Errorf("second keyed Enqueue = %d, %v; want %d, ErrDuplicate", dup, err, keyedID)
		}

		// A worker runs every due job: the migrated pending ones, the
		// two retried ones and the new one, each once.
		due := map[int64]bool{failedID: true, expiredID: true, newID: true, keyedID: true}
		for id, w := range migrated {
			if w.Status == "pending" {
				due[id] = true
			}
		}
		var mu sync.Mutex
		ran := map[int64]int{}
		wk := q.NewWorker(queue.WorkerConfig{Concurrency: 4, Lease: time.Minute, PollInterval: 20 * time.Millisecond,
			MaintenanceInterval: -1, MaxJobs: len(due)})
		wk.HandleDefault(func(ctx context.Context, job *queue.JobRow) error {
			mu.Lock()
			defer mu.Unlock()
			ran[job.ID]++
			return nil
		})
		if err := wk.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("worker: %v", err)
		}
		want := map[int64]int{}
		for id := range due {
			want[id] = 1
		}
		if diff := cmp.Diff(want, ran); diff != "" {
			t.Errorf("jobs run (-want +got):\n%s", diff)
		}
		for _, id := range slices.Sorted(maps.Keys(due)) {
			row, err := q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if row.Status != queue.StatusCompleted {
				t.Errorf("job %d is %s after the worker ran it", id, row.Status)
			}
		}
	})
}
