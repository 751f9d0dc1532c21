package queue

import (
	"context"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestLeaderReleaseEndsLeaseAtOnce: a lease its holder gives up (a worker
// that stops) has passed at once on every engine, also within the second
// of the release (MySQL's UTC_TIMESTAMP() keeps whole seconds): Queue.Leader
// (jobqueue leader) shows no leader, and another holder takes the role at
// its first try, in a new term.
func TestLeaderReleaseEndsLeaseAtOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		first := takeLease(t, q, "first", time.Minute)

		cases := []struct {
			name  string
			check func(t *testing.T)
		}{
			{"Leader shows no leader", func(t *testing.T) {
				ld, err := q.Leader(ctx)
				if err != nil || ld == nil || ld.Holder != "first" || ld.Active {
					t.Errorf("Leader right after the release = %+v, %v; want first, not active", ld, err)
				}
			}},
			{"another takes over at its first try", func(t *testing.T) {
				ok, err := q.st.leaderAcquire(ctx, leaderRole, "second", time.Minute)
				if err != nil || !ok {
					t.Fatalf("second's first try right after the release = %v, %v; want it to lead", ok, err)
				}
				ld, err := q.Leader(ctx)
				if err != nil || ld == nil || ld.Holder != "second" || !ld.Active || ld.Term <= first.term {
					t.Errorf("Leader = %+v, %v; want second active in a term after %d", ld, err, first.term)
				}
			}},
		}
		// Release just after a whole second of the clock, so that the
		// checks run within the second of the release (the server is on
		// this machine).
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
		if err := q.st.leaderRelease(ctx, leaderRole, "first"); err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			t.Run(c.name, c.check)
		}
	})
}
