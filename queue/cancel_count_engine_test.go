package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestCancelledAttemptCountedOnce: a cancelled attempt is counted once,
// by the worker that ran it or by the process whose Cancel ended it, split
// by its lease at the cancel. Two queues on one table, each with its own
// clock and listener, stand for the worker's process and the canceller's.
//   - live: the worker runs it, its lease running; the worker counts it
//     (EventLost, OutcomeCancelled), the canceller nothing.
//   - dead: a claim no worker runs (its process died), cancelled once its
//     lease passed (by the canceller's clock), before any Reclaim; the
//     canceller counts it (EventCancelled), no one else can. Before, no
//     one did.
//   - late: the worker runs it but its lease passed unrenewed (a slow
//     heartbeat), and it learns of the cancel afterwards (its completion
//     refused); the canceller counts it, the worker's EventLost says so
//     (CountedByCancel) and is not counted again.
//   - reclaimed: as late, but a Reclaim ended the attempt before the
//     cancel (the job pending again; the Reclaim counts it): the cancel
//     of the pending job ends no attempt and counts nothing, and the
//     worker's EventLost is lost, not cancelled.
func TestCancelledAttemptCountedOnce(t *testing.T) {
	const lease = time.Minute
	cases := []struct {
		name string
		// run: a worker runs the attempt (else it is claimed and left).
		run bool
		// ahead: the canceller's clock is ahead of the worker's by this
		// much when it cancels (the time that passed since the claim).
		ahead time.Duration
		// reclaim: the canceller runs Reclaim before it cancels.
		reclaim      bool
		wantCanceler []CancelledCount // EventCancelled's counts (nil: none)
		wantLost     Outcome          // the worker's EventLost ("": none)
		wantByCancel bool             // ... with CountedByCancel
	}{
		{name: "live", run: true, ahead: 0, wantLost: OutcomeCancelled},
		{name: "dead", run: false, ahead: 2 * lease, wantCanceler: []CancelledCount{{Type: "mail", Count: 1}}},
		{name: "late", run: true, ahead: 2 * lease, wantCanceler: []CancelledCount{{Type: "mail", Count: 1}}, wantLost: OutcomeCancelled, wantByCancel: true},
		{name: "reclaimed", run: true, ahead: 2 * lease, reclaim: true, wantLost: OutcomeLost},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				env := newTestEnv(t, kind)
				workerClock, cancelClock := &testClock{}, &testClock{}
				workerLog, cancelLog := newEventLog(), newEventLog()
				wq := env.queue(t, nil, withClock(workerClock.now), WithListener(workerLog.listen))
				cq := env.queue(t, nil, withClock(cancelClock.now), WithListener(cancelLog.listen))
				id := enqueue(t, wq, emailArgs{To: tc.name}, Type("mail"))
				cancel := func() error {
					cancelClock.advance(tc.ahead)
					if tc.reclaim {
						if n, err := cq.Reclaim(ctx); err != nil || n != 1 {
							return fmt.Errorf("reclaim ended %d attempts (%v), want 1", n, err)
						}
					}
					return cq.Cancel(ctx, id)
				}
				if tc.run {
					// The heartbeat interval is far beyond the test's
					// run: no renewal moves the lease meanwhile.
					w := wq.NewWorker(WorkerConfig{Concurrency: 1, MaxJobs: 1, Lease: lease, MaintenanceInterval: -1})
					Handle(w, func(context.Context, *Job[emailArgs]) error {
						// The handler returns nil whatever: its
						// completion is refused, and tells it lost.
						return cancel()
					})
					if err := w.Run(ctx); err != nil {
						t.Fatal(err)
					}
				} else {
					rows, err := wq.claim(ctx, []string{"mail"}, 1, lease)
					if err != nil || len(rows) != 1 {
						t.Fatalf("claim: %v, %d rows", err, len(rows))
					}
					if err := cancel(); err != nil {
						t.Fatal(err)
					}
				}
				if j := getJob(t, wq, id); j.Status != StatusFailed || j.Error != cancelError {
					t.Fatalf("job %d is %s %q, want failed %q", id, j.Status, j.Error, cancelError)
				}

				var got []CancelledCount
				if tc.wantCanceler != nil {
					ev := cancelLog.next(t, EventCancelled, 10*time.Second)
					got = ev.Cancelled
					if ev.Count != 1 {
						t.Errorf("EventCancelled.Count = %d, want 1", ev.Count)
					}
				}
				if n := cancelLog.count(EventCancelled); n != len(tc.wantCanceler) {
					t.Errorf("the canceller heard %d EventCancelled, want %d", n, len(tc.wantCanceler))
				}
				if diff := cmp.Diff(tc.wantCanceler, got); diff != "" {
					t.Errorf("attempts the canceller counts (-want +got):\n%s", diff)
				}
				if tc.wantLost != "" {
					ev := workerLog.next(t, EventLost, 10*time.Second)
					if ev.Outcome != tc.wantLost || ev.CountedByCancel != tc.wantByCancel {
						t.Errorf("the worker's EventLost: outcome %s, CountedByCancel %v; want %s, %v",
							ev.Outcome, ev.CountedByCancel, tc.wantLost, tc.wantByCancel)
					}
				}
				if n, want := workerLog.count(EventLost), map[bool]int{true: 1}[tc.wantLost != ""]; n != want {
					t.Errorf("the worker heard %d EventLost, want %d", n, want)
				}
			})
		}
	})
}

// TestCancelledAttemptSplitAtTheSecond: around the end of the lease, to
// the tenth of a second, the canceller (which reads the lease as the
// table stores it) and the worker (which knows it as it wrote it) agree
// on who counts the cancelled attempt: exactly one of them does, on
// every engine, whatever the table's precision (MySQL keeps whole
// seconds).
func TestCancelledAttemptSplitAtTheSecond(t *testing.T) {
	const lease = time.Minute
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		workerClock, cancelClock := &testClock{}, &testClock{}
		workerLog, cancelLog := newEventLog(), newEventLog()
		wq := env.queue(t, nil, withClock(workerClock.now), WithListener(workerLog.listen))
		cq := env.queue(t, nil, withClock(cancelClock.now), WithListener(cancelLog.listen))
		ahead := time.Duration(0) // the canceller's clock ahead of the worker's
		byCanceller, byWorker := 0, 0
		for off := -1500 * time.Millisecond; off <= 1500*time.Millisecond; off += 100 * time.Millisecond {
			id := enqueue(t, wq, emailArgs{To: off.String()}, Type("mail"))
			counted := cancelLog.count(EventCancelled)
			w := wq.NewWorker(WorkerConfig{Concurrency: 1, MaxJobs: 1, Lease: lease, MaintenanceInterval: -1})
			Handle(w, func(context.Context, *Job[emailArgs]) error {
				cancelClock.advance(lease + off - ahead)
				ahead = lease + off
				return cq.Cancel(ctx, id)
			})
			if err := w.Run(ctx); err != nil {
				t.Fatal(err)
			}
			ev := workerLog.next(t, EventLost, 10*time.Second)
			if ev.Job.ID != id || ev.Outcome != OutcomeCancelled {
				t.Fatalf("cancelled %v after the lease's end: the worker's EventLost is of job %d, %s; want job %d, cancelled", off, ev.Job.ID, ev.Outcome, id)
			}
			canceller := cancelLog.count(EventCancelled) - counted
			worker := map[bool]int{false: 1}[ev.CountedByCancel]
			if canceller+worker != 1 {
				t.Errorf("cancelled %v after the lease's end: counted %d times by the canceller and %d by the worker, want once in all", off, canceller, worker)
			}
			byCanceller += canceller
			byWorker += worker
		}
		if byCanceller == 0 || byWorker == 0 {
			t.Errorf("the canceller counted %d attempts and the worker %d: the offsets missed the lease's end", byCanceller, byWorker)
		}
	})
}
