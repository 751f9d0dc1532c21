package jobqueueotel_test

// An attempt whose worker was alive but late: its lease passed, Reclaim
// (of another process) ended it, and then its handler returned.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// TestLateAttemptCountedOnce: a worker's attempt whose lease passed while
// its handler ran is ended by another process's Reclaim (retried); the
// handler then returns and the worker hears that the attempt had lost its
// job (EventLost, outcome lost). Both processes report to one Telemetry,
// and whichever event is heard first, jobqueue.jobs.worked counts the
// attempt once, lost, for the Reclaim; the handler's duration is recorded
// under lost. Before, the attempt was counted twice: retried by the
// Reclaim and lost by the worker.
func TestLateAttemptCountedOnce(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range []struct {
			name      string
			lostFirst bool // the reclaimer's EventReclaimed waits for the worker's EventLost
		}{
			{"reclaimed heard first", false},
			{"lost heard first", true},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				rec := newRecorded(t)
				lostHeard := make(chan struct{})
				var lostOnce sync.Once
				hearLost := queue.WithListener(func(ev queue.Event) {
					if ev.Kind == queue.EventLost {
						lostOnce.Do(func() { close(lostHeard) })
					}
				})
				q, tbl := openQueue(t, e, append(rec.tel.QueueOptions(), hearLost)...)

				// The reclaimer: another process's queue on the table,
				// reporting to the same Telemetry after its own listeners.
				ended := make(chan struct{})
				var endedOnce sync.Once
				r, err := queue.New(e.DB, append([]queue.Option{
					queue.WithTable(tbl.Name), queue.WithLogger(testdb.QuietLogger()),
					queue.WithListener(func(ev queue.Event) {
						if ev.Kind == queue.EventReclaimed {
							endedOnce.Do(func() { close(ended) }) // the attempt's end is written
						}
					}),
					queue.WithListener(func(ev queue.Event) {
						if ev.Kind == queue.EventReclaimed && c.lostFirst {
							select {
							case <-lostHeard:
							case <-time.After(time.Minute): // the test fails below
							}
						}
					}),
				}, rec.tel.QueueOptions()...)...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := r.Close(); err != nil {
						t.Errorf("closing the reclaimer's queue: %v", err)
					}
				})

				id, err := q.Enqueue(ctx, task{"late"}, queue.Type("mail"))
				if err != nil {
					t.Fatal(err)
				}
				reclaimed := make(chan error, 1)
				w := q.NewWorker(queue.WorkerConfig{Concurrency: 1, MaxJobs: 1, Lease: 30 * time.Second, MaintenanceInterval: -1})
				queue.Handle(w, func(hctx context.Context, job *queue.Job[task]) error {
					go func() { reclaimed <- reclaimPassedLease(ctx, e, tbl, r, id) }()
					select {
					case <-ended:
					case <-hctx.Done(): // the heartbeat found the attempt ended
					}
					return nil // late: the attempt no longer holds its job
				})
				if err := w.Run(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-reclaimed:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(2 * time.Minute):
					t.Fatal("the reclaimer's Reclaim did not return (its EventReclaimed waits for an EventLost the worker never emitted?)")
				}

				got := rec.collect(t)
				if diff := cmp.Diff(map[string]int64{"outcome=lost,type=mail": 1}, got[jobqueueotel.MetricWorked]); diff != "" {
					t.Errorf("%s: the attempt counted once, lost, by the Reclaim that ended it (-want +got):\n%s", jobqueueotel.MetricWorked, diff)
				}
				if diff := cmp.Diff(map[string]int64{"outcome=lost,type=mail": 1}, got[jobqueueotel.MetricDuration]); diff != "" {
					t.Errorf("%s: the late handler's duration, under lost (-want +got):\n%s", jobqueueotel.MetricDuration, diff)
				}
			})
		}
	})
}

// reclaimPassedLease puts the lease of job id's attempt behind the clock
// (as a pause of its worker past the lease would) and runs r's Reclaim
// until it ends the attempt (MySQL's times are whole seconds), for up to
// 20 seconds. It runs beside the handler, so it returns its error.
func reclaimPassedLease(ctx context.Context, e *testdb.Env, tbl engine.Table, r *queue.Queue, id int64) error {
	query := "UPDATE " + tbl.Quoted() + " SET lease_until = scheduled_at WHERE id = ? AND status = 'in_progress'"
	if e.Kind == engine.Postgres {
		query = "UPDATE " + tbl.Quoted() + " SET lease_until = scheduled_at WHERE id = $1 AND status = 'in_progress'"
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		// Again each round: a heartbeat may have renewed the lease.
		if _, err := e.DB.ExecContext(ctx, query, id); err != nil {
			return err
		}
		n, err := r.Reclaim(ctx)
		if err != nil || n > 0 {
			return err
		}
		select {
		case <-tick.C:
		case <-deadline:
			return errors.New("Reclaim ended no attempt in 20 s")
		}
	}
}
