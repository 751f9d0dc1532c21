package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// seconds), for a lease as the claim wrote it and for one a heartbeat
// renewed (every 20 ms, so that renewals also race with the cancel).
func TestCancelledAttemptSplitAtTheSecond(t *testing.T) {
	const lease = time.Minute
	cases := []struct {
		name     string
		interval time.Duration // the heartbeat's; 0: none within the test
	}{
		{"claimed", 0},
		{"renewed", 20 * time.Millisecond},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				env := newTestEnv(t, kind)
				workerClock, cancelClock := &testClock{}, &testClock{}
				workerLog, cancelLog := newEventLog(), newEventLog()
				renewals := make(chan struct{}, 1) // told of each renewal sent
				hook := withStatementHook(func(query string, _ sqlRunner) {
					if strings.Contains(query, "name: ExtendLeases") {
						select {
						case renewals <- struct{}{}:
						default:
						}
					}
				})
				wq := env.queue(t, nil, withClock(workerClock.now), WithListener(workerLog.listen), hook)
				cq := env.queue(t, nil, withClock(cancelClock.now), WithListener(cancelLog.listen))
				ahead := time.Duration(0) // the canceller's clock ahead of the worker's
				byCanceller, byWorker := 0, 0
				for off := -1500 * time.Millisecond; off <= 1500*time.Millisecond; off += 100 * time.Millisecond {
					id := enqueue(t, wq, emailArgs{To: off.String()}, Type("mail"))
					counted := cancelLog.count(EventCancelled)
					w := wq.NewWorker(WorkerConfig{Concurrency: 1, MaxJobs: 1, Lease: lease, HeartbeatInterval: tc.interval, MaintenanceInterval: -1})
					Handle(w, func(context.Context, *Job[emailArgs]) error {
						if tc.interval > 0 {
							// The third renewal sent since the handler
							// started: the second, sent during it, is
							// done (the heartbeater sends one at a time).
							for range 3 {
								select {
								case <-renewals:
								case <-time.After(10 * time.Second):
									return errors.New("no lease renewal within 10 s")
								}
							}
						}
						cancelClock.advance(lease + off - ahead)
						ahead = lease + off
						return cq.Cancel(ctx, id)
					})
					if err := w.Run(ctx); err != nil {
						t.Fatal(err)
					}
					ev := workerLog.next(t, EventLost, 10*time.Second)
					if ev.Job.ID != id || ev.Outcome != OutcomeCancelled {
						t.Fatalf("cancelled %v after the lease's end: the worker's EventLost is of job %d, %s; want job %d, cancelled (handler: %v)", off, ev.Job.ID, ev.Outcome, id, ev.Err)
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
	})
}

// TestRenewalLeavesLostAttemptsWrittenLease: a renewal that finds the
// attempt lost (its job cancelled meanwhile) wrote nothing to its row, so
// the attempt's leaseWritten stays the lease the cancel saw. Before, the
// heartbeater recorded the renewal's lease for every attempt of the
// chunk, lost ones included: a renewal sent just after a cancel, of an
// attempt whose lease had passed, made the worker take the lease for
// running and count the attempt that the canceller counted too
// (TestCancelledAttemptSplitAtTheSecond, renewed, now and then).
func TestRenewalLeavesLostAttemptsWrittenLease(t *testing.T) {
	const lease = time.Minute
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		clock := &testClock{}
		q := env.queue(t, nil, withClock(clock.now))
		held := enqueue(t, q, emailArgs{To: "held"}, Type("mail"))
		cancelled := enqueue(t, q, emailArgs{To: "cancelled"}, Type("mail"))
		rows, err := q.claim(ctx, []string{"mail"}, 2, lease)
		if err != nil || len(rows) != 2 {
			t.Fatalf("claim: %v, %d rows", err, len(rows))
		}
		set := newInflightSet()
		attempts := map[int64]*attempt{}
		var refs []attemptRef
		for _, row := range rows {
			actx, cancel := context.WithCancelCause(ctx)
			t.Cleanup(func() { cancel(nil) })
			a := &attempt{row: row, ref: row.ref(), ctx: actx, cancel: cancel, leaseEnd: *row.LeaseUntil, leaseWritten: *row.LeaseUntil}
			set.add(a)
			attempts[row.ID] = a
			refs = append(refs, a.ref)
		}
		claimed := *rows[0].LeaseUntil
		if err := q.Cancel(ctx, cancelled); err != nil {
			t.Fatal(err)
		}
		clock.advance(10 * time.Second)
		h := &heartbeater{q: q, log: q.logger, lease: lease, interval: time.Second, attempts: set, poke: make(chan struct{}, 1)}
		h.renew(ctx, refs)
		if got := set.written(attempts[cancelled]); !got.Equal(claimed) {
			t.Errorf("the lost attempt's leaseWritten is %v after the renewal, want the claim's %v (nothing was written)", got, claimed)
		}
		if got := set.written(attempts[held]); !got.After(claimed) {
			t.Errorf("the held attempt's leaseWritten is %v after the renewal, want the renewal's, past the claim's %v", got, claimed)
		}
		if context.Cause(attempts[cancelled].ctx) == nil {
			t.Error("the lost attempt's handler was not cancelled")
		}
	})
}
