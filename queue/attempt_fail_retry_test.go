package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// deadlockingFail is a store whose fail loses a deadlock the first
// deadlocks times (changing nothing, as a deadlock victim's statement
// does), then writes.
type deadlockingFail struct {
	store
	deadlocks int
	calls     int
}

func (s *deadlockingFail) fail(ctx context.Context, ref attemptRef, e attemptEnd) (bool, error) {
	s.calls++
	if s.calls <= s.deadlocks {
		return false, fmt.Errorf("fail: %w", &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"})
	}
	return s.store.fail(ctx, ref, e)
}

// TestFailRetriesDeadlock: the write of a failed attempt that lost a
// deadlock (CI saw MariaDB pick it as the victim beside a claim, and the
// job then stayed in_progress until Reclaim) runs again, and the failure
// is recorded as if nothing had happened; one that deadlocks every time
// is reported after retryTx's five tries, the job left as it was.
func TestFailRetriesDeadlock(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		pol := Policy(RetryPolicy{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour})
		for _, c := range []struct {
			name      string
			deadlocks int
			calls     int
			status    Status
		}{
			{"twice, then written", 2, 3, StatusPending},
			{"every time", 100, 5, StatusInProgress},
		} {
			t.Run(c.name, func(t *testing.T) {
				id := mustEnqueue(t, q, testArgs{N: 1}, pol)
				jobs := mustClaim(t, q, nil, 1, time.Minute)
				if len(jobs) != 1 || jobs[0].ID != id {
					t.Fatalf("claimed %v, want [%d]", ids(jobs), id)
				}
				st := &deadlockingFail{store: q.st, deadlocks: c.deadlocks}
				orig := q.st
				q.st = st
				status, _, err := q.fail(ctx, jobs[0], errors.New("broke"))
				q.st = orig
				if st.calls != c.calls {
					t.Errorf("the failure was written %d times, want %d", st.calls, c.calls)
				}
				if c.status == StatusPending && (err != nil || status != StatusPending) {
					t.Errorf("fail = %s, %v; want pending, no error", status, err)
				}
				if c.status == StatusInProgress && (err == nil || !retryableTx(err)) {
					t.Errorf("fail = %v, want the deadlock", err)
				}
				if got := getJob(t, q, id); got.Status != c.status {
					t.Errorf("job is %s, want %s", got.Status, c.status)
				}
			})
		}
	})
}
