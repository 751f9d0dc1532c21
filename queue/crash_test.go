package queue

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestCrashedAttemptIsReclaimed claims a job as a worker that then vanishes
// (it never heartbeats, completes or fails) and expects a live worker in
// another process, whose clock is past the vanished attempt's 1 s lease, to
// reclaim and run the job again, and the vanished attempt's late results to
// be refused.
func TestCrashedAttemptIsReclaimed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		ctx := context.Background()
		vanished := env.queue(t, nil)
		id := enqueue(t, vanished, seqArgs{N: 1})
		rows, err := vanished.claim(ctx, nil, 5, time.Second)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(rows) != 1 || rows[0].ID != id || rows[0].Attempts != 1 {
			t.Fatalf("claim returned %+v, want job %d at attempt 1", rows, id)
		}
		old := rows[0]
		oldRef := attemptRef{ID: old.ID, Token: old.ClaimToken}

		events := newEventLog()
		clock := &testClock{}
		clock.advance(2 * time.Second) // the vanished attempt's lease has passed
		live := env.queue(t, env.newPool(t), WithListener(events.listen), withClock(clock.now))
		cfg := fastConfig()
		cfg.Lease = 5 * time.Second
		w := live.NewWorker(cfg)
		ran := make(chan *Job[seqArgs], 1)
		Handle(w, func(ctx context.Context, job *Job[seqArgs]) error { ran <- job; return nil })
		startWorker(t, w)
		job := waitFor(t, ran, 30*time.Second, "the abandoned job to run again")
		if job.ID != id || job.Attempts != 2 || job.ClaimToken == old.ClaimToken {
			t.Errorf("rerun: job %d attempt %d token %q; want job %d at attempt 2 with a new token", job.ID, job.Attempts, job.ClaimToken, id)
		}
		events.next(t, EventCompleted, 10*time.Second)
		// Reclaim emits its event after its write, so the job may run again
		// (the claimer polls) before the event is heard.
		waitUntil(t, 10*time.Second, "the reclaimed event", func() bool { return events.count(EventReclaimed) > 0 })

		// The vanished attempt comes back: everything it tries is refused.
		stale, err := vanished.complete(ctx, []attemptRef{oldRef})
		if err != nil || !slices.Equal(stale, []attemptRef{oldRef}) {
			t.Errorf("late complete: stale %v, err %v; want the old attempt refused", stale, err)
		}
		if _, _, err := vanished.fail(ctx, old, errors.New("late failure")); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("late fail: %v, want ErrLeaseLost", err)
		}
		lost, err := vanished.heartbeat(ctx, []attemptRef{oldRef}, time.Minute)
		if err != nil || !slices.Equal(lost, []attemptRef{oldRef}) {
			t.Errorf("late heartbeat: lost %v, err %v; want the old attempt lost", lost, err)
		}
		row := getJob(t, live, id)
		if row.Status != StatusCompleted || row.Attempts != 2 || strings.Contains(row.Error, "late failure") {
			t.Errorf("row after the late results: %s, attempts %d, error %q; want completed at attempt 2, the late failure not recorded", row.Status, row.Attempts, row.Error)
		}
	})
}

// TestWorkerKilledWithoutGrace stops a worker with no shutdown grace while
// its handler runs: the attempt is released at once (not left to its
// lease), and a worker in another process, with no maintenance at all,
// runs the job again at its second attempt.
func TestWorkerKilledWithoutGrace(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		first := env.queue(t, nil)
		id := enqueue(t, first, seqArgs{N: 1})

		var mu sync.Mutex
		var attempts []int
		record := func(job *Job[seqArgs]) {
			mu.Lock()
			attempts = append(attempts, job.Attempts)
			mu.Unlock()
		}
		cfg := fastConfig()
		cfg.Lease = time.Hour // only the release can give the job back in time
		cfg.ShutdownTimeout = -1
		cfg.MaintenanceInterval = -1
		w1 := first.NewWorker(cfg)
		started := make(chan struct{})
		Handle(w1, func(ctx context.Context, job *Job[seqArgs]) error {
			record(job)
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
		stop1, _ := startWorker(t, w1)
		waitFor(t, started, 30*time.Second, "the first attempt to start")
		if err := stop1(30 * time.Second); err != nil {
			t.Fatalf("first worker: %v", err)
		}
		if row := getJob(t, first, id); row.Status != StatusPending || row.Attempts != 1 || !strings.Contains(row.Error, "interrupted") {
			t.Fatalf("after the hard stop: %s, attempt %d, error %q; want pending at attempt 1, interrupted", row.Status, row.Attempts, row.Error)
		}

		second := env.queue(t, env.newPool(t))
		w2 := second.NewWorker(cfg)
		done := make(chan struct{})
		Handle(w2, func(ctx context.Context, job *Job[seqArgs]) error {
			record(job)
			close(done)
			return nil
		})
		startWorker(t, w2)
		waitFor(t, done, 30*time.Second, "the released job to run again")
		waitUntil(t, 30*time.Second, "the job to be completed", func() bool {
			return getJob(t, second, id).Status == StatusCompleted
		})
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(attempts, []int{1, 2}) {
			t.Errorf("attempts run: %v, want [1 2]", attempts)
		}
	})
}
