package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// seqArgs is a no-op job for the concurrency and crash tests and the
// benchmarks.
type seqArgs struct {
	N int `json:"n"`
}

func (seqArgs) Kind() string { return "seq" }

// enqueueSeq enqueues n seqArgs jobs with the bulk API.
func enqueueSeq(t testing.TB, q *Queue, n int, opts ...EnqueueOption) {
	t.Helper()
	for start := 0; start < n; start += 1000 {
		batch := make([]JobArgs, 0, min(1000, n-start))
		for i := start; i < start+cap(batch); i++ {
			batch = append(batch, seqArgs{N: i})
		}
		if _, err := q.EnqueueMany(context.Background(), batch, opts...); err != nil {
			t.Fatalf("EnqueueMany: %v", err)
		}
	}
}

// TestConcurrentWorkersRunEachJobOnce drains a few thousand jobs with
// several workers, each on its own *sql.DB pool as separate processes would
// have, and checks that every job ran exactly once and ended completed.
func TestConcurrentWorkersRunEachJobOnce(t *testing.T) {
	const workers = 4
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		jobs := 3000
		if testing.Short() {
			jobs = 500
		}
		env := newTestEnv(t, kind)
		producer := env.queue(t, nil)
		enqueueSeq(t, producer, jobs)

		var mu sync.Mutex
		runs := map[int64]int{}
		byWorker := make([]int, workers)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for i := range workers {
			q := env.queue(t, env.newPool(t))
			w := q.NewWorker(WorkerConfig{
				Concurrency:         8,
				Lease:               time.Minute,
				PollInterval:        20 * time.Millisecond,
				MaintenanceInterval: 200 * time.Millisecond,
			})
			Handle(w, func(ctx context.Context, job *Job[seqArgs]) error {
				mu.Lock()
				runs[job.ID]++
				byWorker[i]++
				mu.Unlock()
				return nil
			})
			wg.Go(func() { errs <- w.Run(ctx) })
		}
		// Stop the workers before the pools close, also when the test fails.
		t.Cleanup(func() { cancel(); wg.Wait() })
		// A bound for a hang, not a speed check: under the race detector on
		// a shared machine the drain takes over a minute.
		waitUntil(t, 5*time.Minute, "every job to be completed", func() bool {
			return env.countWhere(t, "status = 'completed'") == jobs
		})
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(runs) != jobs {
			t.Errorf("%d distinct jobs ran, want %d", len(runs), jobs)
		}
		for id, n := range runs {
			if n != 1 {
				t.Errorf("job %d ran %d times", id, n)
			}
		}
		if n := env.countWhere(t, "attempts <> 1 OR status <> 'completed'"); n != 0 {
			t.Errorf("%d jobs not completed at their first attempt", n)
		}
		t.Logf("%s: jobs per worker %v", kind, byWorker)
	})
}
