package queue

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestOutageWaits: an outage's first kept write is its first failure and
// waits completeRetryWait, each next one twice as long up to
// completeOutageWait; a write that reaches the database ends the outage
// once, and the next outage starts over. Two writers sharing a streak
// (the executors) log one outage once.
func TestOutageWaits(t *testing.T) {
	var streak failureStreak
	a, b := newOutage(&streak, nil), newOutage(&streak, nil)
	writers := map[string]*outage{"a": &a, "b": &b}
	for i, step := range []struct {
		op    string        // "fail" or "end"
		by    string        // the writer: "a" or "b"
		first bool          // fail: the first failure of the outage
		wait  time.Duration // fail: the wait before the next write
		ended bool          // end: it ended the outage
	}{
		{op: "end", by: "a"},
		{op: "fail", by: "a", first: true, wait: completeRetryWait},
		{op: "fail", by: "a", wait: 2 * completeRetryWait},
		{op: "fail", by: "b", wait: completeRetryWait},
		{op: "fail", by: "a", wait: 4 * completeRetryWait},
		{op: "fail", by: "a", wait: 8 * completeRetryWait},
		{op: "fail", by: "a", wait: 16 * completeRetryWait},
		{op: "fail", by: "a", wait: 32 * completeRetryWait},
		{op: "fail", by: "a", wait: 64 * completeRetryWait},
		{op: "fail", by: "a", wait: completeOutageWait},
		{op: "fail", by: "a", wait: completeOutageWait},
		{op: "end", by: "b", ended: true},
		{op: "end", by: "a"},
		{op: "fail", by: "a", first: true, wait: completeRetryWait},
		{op: "end", by: "a", ended: true},
	} {
		name, o := fmt.Sprintf("step %d (%s by %s)", i, step.op, step.by), writers[step.by]
		switch step.op {
		case "fail":
			if first, wait := o.failed(); first != step.first || wait != step.wait {
				t.Errorf("%s: failed() = %v, %v; want %v, %v", name, first, wait, step.first, step.wait)
			}
		case "end":
			if ended, _ := o.ended(); ended != step.ended {
				t.Errorf("%s: ended() = %v, want %v", name, ended, step.ended)
			}
		}
	}
}

// TestOutageKeeps: a write that could not reach the database is kept
// while the worker runs, and no longer once it stops (its shutdown budget
// counts); the budget is spent once its end passes. A run without a
// budget never stops.
func TestOutageKeeps(t *testing.T) {
	lost := fmt.Errorf("writing: %w", driver.ErrBadConn)
	refused := errors.New("the statement was refused")
	budget := newShutdownBudget(context.Background())
	t.Cleanup(budget.close)
	for _, step := range []struct {
		name   string
		budget *shutdownBudget
		before func()
		err    error
		keeps  bool
		spent  bool
	}{
		{name: "no budget, connection lost", err: lost, keeps: true},
		{name: "no budget, refused", err: refused},
		{name: "running, connection lost", budget: budget, err: lost, keeps: true},
		{name: "running, refused", budget: budget, err: refused},
		{name: "stopping, connection lost", budget: budget, before: func() { budget.spendWithin(time.Hour) }, err: lost},
		{name: "spent, connection lost", budget: budget, before: func() {
			budget.spendWithin(0)
			<-budget.ctx.Done()
		}, err: lost, spent: true},
	} {
		if step.before != nil {
			step.before()
		}
		o := newOutage(&failureStreak{}, step.budget)
		if got := o.keeps(step.err); got != step.keeps {
			t.Errorf("%s: keeps = %v, want %v", step.name, got, step.keeps)
		}
		if got := o.spent(); got != step.spent {
			t.Errorf("%s: spent = %v, want %v", step.name, got, step.spent)
		}
	}
}

// TestFinishedBy: a completed job's finished_at tells whether a lost write
// of this attempt's completion completed it (the same time, as the engine
// stores it) or another attempt did (another time).
func TestFinishedBy(t *testing.T) {
	at := time.Date(2026, 12, 7, 16, 0, 1, 123456789, time.UTC)
	later := at.Add(3 * time.Second)
	ptr := func(t time.Time) *time.Time { return &t }
	for _, c := range []struct {
		name     string
		finished *time.Time
		writes   []time.Time
		want     bool
	}{
		{"not finished", nil, []time.Time{at}, false},
		{"microseconds, truncated (PostgreSQL)", ptr(at.Truncate(time.Microsecond)), []time.Time{at}, true},
		{"microseconds, rounded", ptr(at.Round(time.Microsecond)), []time.Time{at}, true},
		{"whole seconds (MySQL DATETIME)", ptr(at.Round(time.Second)), []time.Time{at}, true},
		{"the second of two lost writes", ptr(later.Truncate(time.Microsecond)), []time.Time{at, later}, true},
		{"another attempt, later", ptr(later.Truncate(time.Microsecond)), []time.Time{at}, false},
		{"another attempt, a millisecond after", ptr(at.Add(time.Millisecond).Truncate(time.Microsecond)), []time.Time{at}, false},
		{"no lost write", ptr(at), nil, false},
	} {
		if got := finishedBy(c.finished, c.writes); got != c.want {
			t.Errorf("%s: finishedBy = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestFailWritten: a job is as a lost write of its attempt's failure left
// it only with that write's status, error, attempts and cleared token, and
// the time it set as the engine stores it (finished_at when failed,
// scheduled_at when retried: finishedBy); another attempt that ended it
// with the same status and error at another time did not.
func TestFailWritten(t *testing.T) {
	at := time.Date(2026, 12, 7, 16, 0, 1, 123456789, time.UTC)
	retryAt := at.Add(time.Minute)
	failed := attemptEnd{outcome: OutcomeFailed, status: StatusFailed, errText: "boom", finishedAt: at}
	retried := attemptEnd{outcome: OutcomeRetried, status: StatusPending, errText: "boom", retryAt: retryAt}
	row := func(status Status, scheduled time.Time, finished *time.Time) *JobRow {
		return &JobRow{Status: status, Error: "boom", Attempts: 2, ScheduledAt: scheduled, FinishedAt: finished}
	}
	ptr := func(t time.Time) *time.Time { return &t }
	for _, c := range []struct {
		name string
		row  *JobRow
		end  attemptEnd
		want bool
	}{
		{"failed, its finished_at (PostgreSQL)", row(StatusFailed, at, ptr(at.Truncate(time.Microsecond))), failed, true},
		{"failed, its finished_at in seconds (MySQL)", row(StatusFailed, at, ptr(at.Truncate(time.Second))), failed, true},
		{"failed by another attempt, another finished_at", row(StatusFailed, at, ptr(at.Add(time.Second).Truncate(time.Microsecond))), failed, false},
		{"failed, not finished", row(StatusFailed, at, nil), failed, false},
		{"retried, its scheduled_at", row(StatusPending, retryAt.Truncate(time.Microsecond), nil), retried, true},
		{"retried, its scheduled_at in seconds (MySQL)", row(StatusPending, retryAt.Round(time.Second), nil), retried, true},
		{"retried by another attempt, another scheduled_at", row(StatusPending, retryAt.Add(time.Hour).Truncate(time.Microsecond), nil), retried, false},
		{"another status", row(StatusExpired, at, ptr(at.Truncate(time.Microsecond))), failed, false},
		{"another error", &JobRow{Status: StatusFailed, Error: "bang", Attempts: 2, FinishedAt: ptr(at)}, failed, false},
		{"a later attempt", &JobRow{Status: StatusFailed, Error: "boom", Attempts: 3, FinishedAt: ptr(at)}, failed, false},
		{"claimed again", &JobRow{Status: StatusInProgress, Error: "boom", Attempts: 2, ScheduledAt: retryAt, ClaimToken: "t-2"}, retried, false},
	} {
		if got := failWritten(c.row, 2, c.end); got != c.want {
			t.Errorf("%s: failWritten = %v, want %v", c.name, got, c.want)
		}
	}
}
