package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestReclaimFailingLaterReports: a Reclaim whose second round fails (its
// context is cancelled once the first round, of 500, is written) returns
// the error and the 500 attempts it ended, and emits EventReclaimed for
// them, so that the telemetry counts them: they stay ended. Before, an
// error dropped the event: those attempts were counted by no process.
func TestReclaimFailingLaterReports(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		env := coreEnv(t, kind)
		var mu sync.Mutex
		var heard []Event
		q, clock := coreQueue(t, env,
			withBatchHook(0, func(op string, _ int64) {
				if op == "reclaim" {
					cancel() // the next round fails
				}
			}),
			WithListener(func(ev Event) {
				if ev.Kind == EventReclaimed {
					mu.Lock()
					heard = append(heard, ev)
					mu.Unlock()
				}
			}))
		args := make([]JobArgs, reclaimBatch+1)
		for i := range args {
			args[i] = testArgs{N: i}
		}
		if _, err := q.EnqueueMany(context.Background(), args, Type("mail")); err != nil {
			t.Fatal(err)
		}
		if got := mustClaim(t, q, nil, len(args), time.Minute); len(got) != len(args) {
			t.Fatalf("claimed %d jobs, want %d", len(got), len(args))
		}
		clock.add(2 * time.Minute)

		n, err := q.Reclaim(ctx)
		if !errors.Is(err, context.Canceled) || n != reclaimBatch {
			t.Fatalf("Reclaim = %d, %v; want %d and the cancelled round's error", n, err, reclaimBatch)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []ReclaimedCount{{Type: "mail", Outcome: OutcomeRetried, Count: reclaimBatch}}
		if len(heard) != 1 || heard[0].Count != reclaimBatch || len(heard[0].Reclaimed) != 1 || heard[0].Reclaimed[0] != want[0] {
			t.Errorf("EventReclaimed heard %+v, want one with Count %d and Reclaimed %v", heard, reclaimBatch, want)
		}
	})
}
