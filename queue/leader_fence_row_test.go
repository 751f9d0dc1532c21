package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestFenceRowFollowsTheLease: an act lands only while the role's fence
// row names the act's holder and term (fence.go). When it does not — the
// row is missing, as in a table led until now by an older version, or
// names an earlier term, as an older version's takeover leaves it — the
// act is refused and changes nothing, and the holder's next renewal, in
// the same term, moves the fence row on (acquireLeader), after which the
// act lands.
func TestFenceRowFollowsTheLease(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range []struct {
			name  string
			spoil string // a statement on the leader table (%s), its argument the fence row's name
		}{
			{"missing", "DELETE FROM %s WHERE name = ?"},
			{"an earlier term", "UPDATE %s SET term = term - 1 WHERE name = ?"},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				env := newTestEnv(t, kind)
				q, clock := coreQueue(t, env)
				mustEnqueue(t, q, testArgs{}, ExpiresIn(time.Millisecond))
				clock.add(time.Minute) // the job is overdue
				f := takeLease(t, q, "first", time.Minute)
				leader := ddl.Side(env.tbl, "leader").Quoted()
				if n := env.exec(t, fmt.Sprintf(c.spoil, leader), fenceRowName(leaderRole)); n != 1 {
					t.Fatalf("%d fence rows changed; want 1", n)
				}
				expire := func() error {
					_, err := q.expireOverdue(ctx, f)
					return err
				}
				if err := expire(); !errors.Is(err, errTermEnded) {
					t.Fatalf("an act with the fence row %s = %v; want errTermEnded", c.name, err)
				}
				if n := env.countWhere(t, "status = 'expired'"); n != 0 {
					t.Fatalf("%d jobs expired by the refused act", n)
				}
				if ok, err := q.st.leaderAcquire(ctx, leaderRole, "first", time.Minute); !ok || err != nil {
					t.Fatalf("the holder's renewal = %v, %v", ok, err)
				}
				r, err := q.st.leaderGet(ctx, leaderRole)
				if err != nil || r.term != f.term {
					t.Fatalf("the renewal's row %+v, %v; want term %d still", r, err, f.term)
				}
				if err := expire(); err != nil {
					t.Fatalf("the act after the renewal: %v", err)
				}
				if n := env.countWhere(t, "status = 'expired'"); n != 1 {
					t.Fatalf("%d jobs expired by the act after the renewal; want 1", n)
				}
			})
		}
	})
}
