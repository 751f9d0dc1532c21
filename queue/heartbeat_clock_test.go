package queue

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestHeartbeatLeaseEndFollowsClockSteps: the heartbeater's record of when
// a running attempt's lease ends (what cancelUnrenewed and tooLate judge
// by) is the lease_until its last renewal wrote, never later, also when
// the process's wall clock was stepped back between two renewals (NTP
// correcting a clock that ran ahead). The record only ever moved forward,
// so after a step back of ten minutes the worker believed in a lease ten
// minutes longer than the table's: when the next renewals then failed it
// did not cancel the handler before the table's lease ran out, and the
// leader's Reclaim let another worker run the job beside it.
func TestHeartbeatLeaseEndFollowsClockSteps(t *testing.T) {
	const lease, interval = time.Minute, 20 * time.Second
	cases := []struct {
		name string
		step time.Duration // the wall clock's step between the claim and the renewal
	}{
		{"no step", 0},
		{"forward 10m", 10 * time.Minute},
		{"back 2s", -2 * time.Second},
		{"back 10m", -10 * time.Minute},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				clock := &testClock{}
				q := env.queue(t, nil, withClock(clock.now))
				id := enqueue(t, q, emailArgs{To: tc.name}, Type(tc.name))
				rows, err := q.claim(ctx, []string{tc.name}, 1, lease)
				if err != nil || len(rows) != 1 || rows[0].ID != id {
					t.Fatalf("claim: %v, %d rows", err, len(rows))
				}
				set := newInflightSet()
				actx, cancel := context.WithCancelCause(ctx)
				defer cancel(nil)
				a := &attempt{row: rows[0], ref: rows[0].ref(), ctx: actx, cancel: cancel, leaseEnd: *rows[0].LeaseUntil}
				set.add(a)
				h := &heartbeater{q: q, log: slog.New(slog.NewTextHandler(io.Discard, nil)), lease: lease,
					interval: interval, attempts: set, poke: make(chan struct{}, 1)}

				clock.advance(tc.step)
				h.renew(ctx, set.toRenew(h.due()))
				if cause := context.Cause(actx); cause != nil {
					t.Fatalf("the renewal cancelled the handler: %v", cause)
				}
				stored := getJob(t, q, id).LeaseUntil
				if stored == nil {
					t.Fatal("the job has no lease_until after the renewal")
				}
				end, _ := set.leaseEndOf(a.ref)
				if end.After(*stored) {
					t.Fatalf("the worker counts on its lease until %v, the table's ends at %v", end, *stored)
				}

				// The next renewal fails when the table's lease ends before
				// the heartbeat after it: the handler must stop now.
				clock.advance(stored.Sub(clock.now()) - interval/2)
				h.cancelUnrenewed(set.toRenew(h.due()))
				if cause := context.Cause(actx); !errors.Is(cause, errLeaseRanOut) {
					t.Fatalf("handler not cancelled %v before its lease's end in the table: cause %v", interval/2, cause)
				}
			})
		}
	})
}
