package queue

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestCancelRetriedMeanwhile: a Cancel of a failed job races a Retry that
// makes the job pending between Cancel's statement and its read of the
// statuses of the ids it left alone (PostgreSQL and SQLite; MySQL reads
// them locked first, so its Cancel sees the job pending and cancels it).
// The refusal says what happened and what to do (the job had finished; it
// is pending now; cancel it again), not that the job "is pending and was
// left unchanged; only pending and in_progress jobs can be cancelled",
// which it used to say.
func TestCancelRetriedMeanwhile(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		other, _ := coreQueue(t, env) // another client of the table
		id := mustEnqueue(t, other, testArgs{N: 1}, Type("f"))
		failForGood(t, other, "f")

		var once sync.Once
		var retried bool
		var retryErr error
		q, _ := coreQueue(t, env, withStatementHook(func(query string, _ sqlRunner) {
			// Right before the statuses are read: after PostgreSQL's and
			// SQLite's cancel statement, before MySQL's.
			if !strings.Contains(query, "name: JobStatuses ") && !strings.Contains(query, "name: LockJobStatuses ") {
				return
			}
			once.Do(func() { retried, retryErr = other.Retry(ctx, id) })
		}))
		err := q.Cancel(ctx, id)
		if retryErr != nil || !retried {
			t.Fatalf("the Retry in between = %v, %v; want it done", retried, retryErr)
		}
		row := getJob(t, q, id)
		if err == nil {
			if row.Status != StatusFailed || row.Error != cancelError {
				t.Fatalf("Cancel = nil but the job is %+v; want it cancelled", row)
			}
			return
		}
		if !errors.Is(err, ErrJobFinished) {
			t.Fatalf("Cancel = %v; want ErrJobFinished (the job had finished when the cancel ran)", err)
		}
		if row.Status != StatusPending {
			t.Fatalf("Cancel refused but the job is %+v; want the retried job pending", row)
		}
		msg := err.Error()
		if strings.Contains(msg, "only pending and in_progress jobs can be cancelled") || !strings.Contains(msg, "pending now") || !strings.Contains(msg, "cancel it again") {
			t.Errorf("Cancel = %q; want it to say that the job is pending now and to cancel it again", msg)
		}
	})
}

// TestCancelWaitingJobs: Cancel of pending jobs that are not due yet, one
// scheduled for later and one waiting for its retry after a failed
// attempt, ends them at once like any pending job (failed, "cancelled",
// finished_at now, the attempts made kept): they are not claimed when
// their time comes, and Retry runs them again.
func TestCancelWaitingJobs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		scheduled := mustEnqueue(t, q, testArgs{N: 1}, Type("w"), Delay(time.Hour))
		backoff := mustEnqueue(t, q, testArgs{N: 2}, Type("w"))
		claimed := mustClaim(t, q, []string{"w"}, 1, time.Minute)
		if len(claimed) != 1 || claimed[0].ID != backoff {
			t.Fatalf("claimed %v; want job %d", claimed, backoff)
		}
		if st, _, err := q.fail(ctx, claimed[0], errors.New("try later")); err != nil || st != StatusPending {
			t.Fatalf("fail = %s, %v; want pending (a retry ahead)", st, err)
		}
		cases := []struct {
			name     string
			id       int64
			attempts int
		}{
			{"scheduled for later", scheduled, 0},
			{"waiting for its retry", backoff, 1},
		}
		for _, c := range cases {
			if row := getJob(t, q, c.id); row.Status != StatusPending || !row.ScheduledAt.After(clock.now()) {
				t.Fatalf("%s: the job is %+v; want it pending and not due", c.name, row)
			}
			if err := q.Cancel(ctx, c.id); err != nil {
				t.Fatalf("%s: Cancel = %v", c.name, err)
			}
			row := getJob(t, q, c.id)
			if row.Status != StatusFailed || row.Error != cancelError || row.FinishedAt == nil ||
				!row.FinishedAt.Equal(clock.now()) || row.Attempts != c.attempts {
				t.Errorf("%s: the cancelled job is %+v; want failed, %q, finished now, %d attempts", c.name, row, cancelError, c.attempts)
			}
		}
		clock.add(2 * time.Hour)
		if got := mustClaim(t, q, []string{"w"}, 10, time.Minute); len(got) != 0 {
			t.Fatalf("claimed %d cancelled jobs once they were due; want none", len(got))
		}
		for _, c := range cases {
			if ok, err := q.Retry(ctx, c.id); err != nil || !ok {
				t.Fatalf("%s: Retry = %v, %v", c.name, ok, err)
			}
		}
		if got := mustClaim(t, q, []string{"w"}, 10, time.Minute); len(got) != 2 {
			t.Fatalf("claimed %d retried jobs; want 2", len(got))
		}
	})
}
