package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestUniqueKeyFreedAtEveryEnd: a job's unique key is free again once the
// job has ended, whichever way it ended (those TestUniqueLife does not
// take: a failure for good, attempts used up, expiry while pending,
// reclaim of an abandoned attempt to failed or expired, completion with
// delete on success), and a UniqueFor period still holds it after each of
// those ends but delete on success (a key whose job is gone is not held).
func TestUniqueKeyFreedAtEveryEnd(t *testing.T) {
	one := RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second}
	cases := []struct {
		name string
		opts []EnqueueOption
		// end ends the one live job of type typ, enqueued with a key.
		end        func(t *testing.T, q *Queue, clock *fixedClock, typ string)
		deleteOnOK bool
		periodHeld bool // a UniqueFor period still holds the key after end
	}{
		{"failed for good", nil, func(t *testing.T, q *Queue, _ *fixedClock, typ string) { failForGood(t, q, typ) }, false, true},
		{"attempts used up", []EnqueueOption{Policy(one)}, func(t *testing.T, q *Queue, _ *fixedClock, typ string) {
			jobs := mustClaim(t, q, []string{typ}, 1, time.Minute)
			if st, _, err := q.fail(context.Background(), jobs[0], errors.New("no")); err != nil || st != StatusFailed {
				t.Fatalf("fail = %s, %v; want failed", st, err)
			}
		}, false, true},
		{"expired while pending", []EnqueueOption{ExpiresIn(time.Minute)}, func(t *testing.T, q *Queue, clock *fixedClock, typ string) {
			clock.add(2 * time.Minute)
			if n, err := q.ExpireOverdue(context.Background()); err != nil || n != 1 {
				t.Fatalf("ExpireOverdue = %d, %v; want 1", n, err)
			}
		}, false, true},
		{"reclaimed to failed", []EnqueueOption{Policy(one)}, func(t *testing.T, q *Queue, clock *fixedClock, typ string) {
			mustClaim(t, q, []string{typ}, 1, time.Minute)
			clock.add(2 * time.Minute)
			if n, err := q.Reclaim(context.Background()); err != nil || n != 1 {
				t.Fatalf("Reclaim = %d, %v; want 1", n, err)
			}
		}, false, true},
		{"reclaimed to expired", []EnqueueOption{ExpiresIn(time.Minute)}, func(t *testing.T, q *Queue, clock *fixedClock, typ string) {
			mustClaim(t, q, []string{typ}, 1, 2*time.Minute)
			clock.add(3 * time.Minute)
			if n, err := q.Reclaim(context.Background()); err != nil || n != 1 {
				t.Fatalf("Reclaim = %d, %v; want 1", n, err)
			}
		}, false, true},
		{"completed and deleted on success", nil, func(t *testing.T, q *Queue, _ *fixedClock, typ string) { completeJob(t, q, typ) }, true, false},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				env := coreEnv(t, kind)
				q, clock := coreQueue(t, env, WithDeleteOnSuccess(c.deleteOnOK))
				id := newKeyed(t, q, "k", append([]EnqueueOption{Type("e")}, c.opts...)...)
				wantDup(t, q, "k", id)
				c.end(t, q, clock, "e")
				wantNew(t, q, "k", id)
				// With a period: held after the same end (but one that
				// deletes the job).
				held := newKeyed(t, q, "held", append([]EnqueueOption{Type("p"), UniqueFor(time.Hour)}, c.opts...)...)
				c.end(t, q, clock, "p")
				if c.periodHeld {
					wantDup(t, q, "held", held)
				} else {
					wantNew(t, q, "held", held)
				}
			})
		}
	})
}
