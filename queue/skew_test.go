package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestReclaimSkewTolerance measures the clock skew between a worker and
// the leader that Reclaim tolerates (README, Clocks): lease_until is the
// worker's clock plus the lease, renewed every heartbeat interval, and
// Reclaim compares it with the leader's clock. A healthy attempt's lease,
// one heartbeat interval after its last renewal (the longest it waits for
// the next), is spared by a leader whose clock is ahead of the worker's by
// less than Lease - HeartbeatInterval, and reclaimed beyond that. Two
// queues on one table, each with its own clock, stand for the two
// processes.
func TestReclaimSkewTolerance(t *testing.T) {
	const lease, interval = time.Minute, 20 * time.Second
	cases := []struct {
		ahead     time.Duration // the leader's clock ahead of the worker's
		reclaimed bool
	}{
		{0, false},
		{-time.Hour, false},
		{30 * time.Second, false},
		{lease - interval - 2*time.Second, false},
		{lease - interval + 2*time.Second, true},
		{lease, true},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		for _, tc := range cases {
			t.Run(fmt.Sprint(tc.ahead), func(t *testing.T) {
				ctx := context.Background()
				workerClock, leaderClock := &testClock{}, &testClock{offset: tc.ahead}
				worker := env.queue(t, nil, withClock(workerClock.now))
				leader := env.queue(t, nil, withClock(leaderClock.now))
				typ := "skew" + fmt.Sprint(tc.ahead)
				id := enqueue(t, worker, emailArgs{To: typ}, Type(typ))
				rows, err := worker.claim(ctx, []string{typ}, 1, lease)
				if err != nil || len(rows) != 1 {
					t.Fatalf("claim: %v, %d rows", err, len(rows))
				}
				workerClock.advance(interval)
				leaderClock.advance(interval)
				if lost, err := worker.heartbeat(ctx, []attemptRef{rows[0].ref()}, lease); err != nil || len(lost) != 0 {
					t.Fatalf("heartbeat: lost %v, %v", lost, err)
				}
				// The next heartbeat is one interval away.
				workerClock.advance(interval)
				leaderClock.advance(interval)
				before := getJob(t, worker, id).LeaseUntil
				if _, err := leader.Reclaim(ctx); err != nil { // the earlier cases' jobs too
					t.Fatal(err)
				}
				j := getJob(t, worker, id)
				if got := j.ClaimToken != rows[0].ClaimToken; got != tc.reclaimed {
					t.Fatalf("leader ahead by %v: reclaimed %v, want %v (lease_until %v, the leader's now %v)", tc.ahead, got, tc.reclaimed, before, leaderClock.now())
				}
			})
		}
	})
}
