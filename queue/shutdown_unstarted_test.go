package queue

import (
	"context"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestShutdownGivesBackUnstartedAttempts: at shutdown, a claimed job whose
// handler never started (it waited in the claimer's buffer when
// ShutdownTimeout passed) is given back as it was before its claim:
// pending, its attempt not counted, its error kept. Before, it was
// released like a cut-off handler, its attempt counted: a job on its last
// attempt failed without ever running ("interrupted: the worker shut
// down"), and any other lost an attempt it never made. An attempt whose
// handler did run and was cut off is still released by the outcome rule.
func TestShutdownGivesBackUnstartedAttempts(t *testing.T) {
	cases := []struct {
		name        string
		started     bool // the handler ran and the shutdown cut it off
		maxAttempts int
		cancelled   bool // Cancel ended the job before the release
		wantStatus  Status
		wantTries   int
		wantError   string
	}{
		{"not started, last attempt", false, 1, false, StatusPending, 0, ""},
		{"not started, attempts left", false, 3, false, StatusPending, 0, ""},
		{"not started, cancelled meanwhile", false, 1, true, StatusFailed, 1, cancelError},
		{"started, last attempt", true, 1, false, StatusFailed, 1, releaseError},
		{"started, attempts left", true, 3, false, StatusPending, 1, releaseError},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		ids := make([]int64, len(cases))
		for i, c := range cases {
			ids[i] = mustEnqueue(t, q, testArgs{N: i}, Policy(RetryPolicy{MaxAttempts: c.maxAttempts, BaseDelay: time.Second, MaxDelay: time.Second}))
		}
		rows := map[int64]*JobRow{}
		for _, j := range mustClaim(t, q, nil, len(cases), time.Hour) {
			rows[j.ID] = j
		}
		if len(rows) != len(cases) {
			t.Fatalf("claimed %d jobs, want %d", len(rows), len(cases))
		}
		ex := &executors{
			q: q, log: testdb.QuietLogger(), dbCtx: ctx,
			handlers: map[string]handlerFunc{}, attempts: newInflightSet(), released: &releaseList{},
		}
		ex.work = ex.handle
		for i, c := range cases {
			row := rows[ids[i]]
			actx, cancel := context.WithCancelCause(ctx)
			a := &attempt{row: row, ref: row.ref(), ctx: actx, cancel: cancel, leaseEnd: *row.LeaseUntil}
			ex.attempts.add(a)
			if c.started {
				// The shutdown cancels the handler while it runs.
				ex.handlers["test"] = func(ctx context.Context, _ *JobRow) error {
					a.cancel(errShutdown)
					return context.Cause(ctx)
				}
			} else {
				a.cancel(errShutdown) // cut off while it waited in the buffer
			}
			ex.execute(a)
			if c.cancelled {
				if err := q.Cancel(ctx, row.ID); err != nil {
					t.Fatalf("%s: Cancel: %v", c.name, err)
				}
			}
		}
		r := &run{q: q, log: testdb.QuietLogger(), dbCtx: ctx, released: ex.released}
		r.releaseInterrupted()
		for i, c := range cases {
			j := getJob(t, q, ids[i])
			if j.Status != c.wantStatus || j.Attempts != c.wantTries || j.Error != c.wantError {
				t.Errorf("%s: job is %s at %d attempts, error %q; want %s at %d attempts, error %q",
					c.name, j.Status, j.Attempts, j.Error, c.wantStatus, c.wantTries, c.wantError)
			}
			if j.ClaimToken != "" || j.LeaseUntil != nil {
				t.Errorf("%s: claim token %q and lease %v left; want both cleared", c.name, j.ClaimToken, j.LeaseUntil)
			}
			if !c.started && !c.cancelled && (!j.ScheduledAt.Equal(rows[ids[i]].ScheduledAt) || j.FinishedAt != nil) {
				t.Errorf("%s: scheduled_at %v (was %v), finished_at %v; want the job as before its claim",
					c.name, j.ScheduledAt, rows[ids[i]].ScheduledAt, j.FinishedAt)
			}
		}
	})
}
