package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestDecideOutcome is the table of the one outcome rule: a pure function
// of the job, the cause and the clock.
func TestDecideOutcome(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	job := func(attempts, max int, expires *time.Time) *JobRow {
		return &JobRow{ID: 1, Attempts: attempts, MaxAttempts: max, BaseDelay: time.Minute, MaxDelay: time.Hour,
			ScheduledAt: now.Add(-time.Hour), ExpiresAt: expires}
	}
	plain := errors.New("boom")
	released, reclaimed, cancelled := endCause{kind: causeReleased}, endCause{kind: causeReclaimed}, endCause{kind: causeCancelled}
	cases := []struct {
		name    string
		job     *JobRow
		cause   endCause
		outcome Outcome
		next    time.Duration // for retried: scheduled_at − now
		errText string        // "" for the handler's error text
	}{
		{"first failure waits base", job(1, 5, nil), handlerFailed(plain), OutcomeRetried, time.Minute, ""},
		{"second waits twice base", job(2, 5, nil), handlerFailed(plain), OutcomeRetried, 2 * time.Minute, ""},
		{"fourth waits 8×base", job(4, 10, nil), handlerFailed(plain), OutcomeRetried, 8 * time.Minute, ""},
		{"capped at max", job(9, 10, nil), handlerFailed(plain), OutcomeRetried, time.Hour, ""},
		{"huge attempts do not overflow", job(500, 1000, nil), handlerFailed(plain), OutcomeRetried, time.Hour, ""},
		{"last attempt fails", job(5, 5, nil), handlerFailed(plain), OutcomeFailed, 0, ""},
		{"beyond max fails", job(6, 5, nil), handlerFailed(plain), OutcomeFailed, 0, ""},
		{"permanent fails at once", job(1, 5, nil), handlerFailed(Permanent(plain)), OutcomeFailed, 0, ""},
		{"wrapped permanent", job(1, 5, nil), handlerFailed(fmt.Errorf("ctx: %w", Permanent(plain))), OutcomeFailed, 0, ""},
		{"retry after", job(1, 5, nil), handlerFailed(RetryAfter(5*time.Second, plain)), OutcomeRetried, 5 * time.Second, ""},
		{"negative retry after is now", job(1, 5, nil), handlerFailed(RetryAfter(-time.Minute, plain)), OutcomeRetried, 0, ""},
		{"retry after on the last attempt fails", job(5, 5, nil), handlerFailed(RetryAfter(5*time.Second, plain)), OutcomeFailed, 0, ""},
		{"deadline passed expires", job(1, 5, &past), handlerFailed(plain), OutcomeExpired, 0, ""},
		{"deadline now expires", job(1, 5, &now), handlerFailed(plain), OutcomeExpired, 0, ""},
		{"deadline passed beats permanent", job(1, 5, &past), handlerFailed(Permanent(plain)), OutcomeExpired, 0, ""},
		{"deadline passed beats used-up", job(5, 5, &past), handlerFailed(plain), OutcomeExpired, 0, ""},
		{"future deadline retries", job(1, 5, &future), handlerFailed(plain), OutcomeRetried, time.Minute, ""},
		{"nil error still fails", job(1, 5, nil), handlerFailed(nil), OutcomeRetried, time.Minute, ""},

		{"released retries at once", job(1, 5, &future), released, OutcomeRetried, 0, releaseError},
		{"released last attempt fails", job(5, 5, nil), released, OutcomeFailed, 0, releaseError},
		{"released past deadline expires", job(5, 5, &past), released, OutcomeExpired, 0, releaseError},
		{"reclaimed retries at once", job(4, 5, nil), reclaimed, OutcomeRetried, 0, reclaimError},
		{"reclaimed last attempt fails", job(5, 5, &future), reclaimed, OutcomeFailed, 0, reclaimError},
		{"reclaimed past deadline expires", job(1, 5, &now), reclaimed, OutcomeExpired, 0, reclaimError},
		{"cancelled fails", job(1, 5, nil), cancelled, OutcomeCancelled, 0, cancelError},
		{"cancelled beats a passed deadline", job(1, 5, &past), cancelled, OutcomeCancelled, 0, cancelError},
		{"cancelled beats used-up", job(5, 5, nil), cancelled, OutcomeCancelled, 0, cancelError},
	}
	statusOf := map[Outcome]Status{OutcomeRetried: StatusPending, OutcomeFailed: StatusFailed,
		OutcomeExpired: StatusExpired, OutcomeCancelled: StatusFailed}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := decideOutcome(c.job, c.cause, now)
			if e.outcome != c.outcome || e.status != statusOf[c.outcome] {
				t.Fatalf("outcome %s (status %s), want %s (%s)", e.outcome, e.status, c.outcome, statusOf[c.outcome])
			}
			switch c.outcome {
			case OutcomeRetried:
				if got := e.retryAt.Sub(now); e.retryAt.IsZero() || got != c.next || !e.finishedAt.IsZero() {
					t.Errorf("next in %v (retry at %v, finished %v), want %v", got, e.retryAt, e.finishedAt, c.next)
				}
			default: // finished now; scheduled_at kept
				if !e.finishedAt.Equal(now) || !e.retryAt.IsZero() {
					t.Errorf("finished_at %v retry at %v; want finished now, scheduled_at kept", e.finishedAt, e.retryAt)
				}
			}
			want := c.errText
			if want == "" {
				want = errorText(c.cause.err)
			}
			if e.errText == "" || e.errText != want {
				t.Errorf("error text %q, want %q", e.errText, want)
			}
			if again := decideOutcome(c.job, c.cause, now); again != e {
				t.Errorf("not a pure function: %+v then %+v", e, again)
			}
		})
	}
}

// TestEndPathsAgree puts jobs in one state each and ends their attempts by
// every path that ends an attempt without success (a handler's failure,
// release at shutdown, reclaim of an abandoned attempt): each row is the
// job as it was with the outcome rule's decision applied, so the paths
// agree wherever the rule gives them the same end.
func TestEndPathsAgree(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		one := Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second})
		states := []struct {
			name string
			opts []EnqueueOption
			want Outcome // of a release or reclaim; a handler's RetryAfter(0) too
		}{
			{"attempts left", nil, OutcomeRetried},
			{"attempts used up", []EnqueueOption{one}, OutcomeFailed},
			{"deadline passed", []EnqueueOption{ExpiresIn(time.Second)}, OutcomeExpired},
		}
		paths := []string{"fail", "release", "reclaim"}
		type key struct{ state, path string }
		before := map[key]*JobRow{}
		for _, s := range states {
			for _, p := range paths {
				typ := strings.ReplaceAll(s.name, " ", "_") + "_" + p
				mustEnqueue(t, q, testArgs{N: 1}, append([]EnqueueOption{Type(typ)}, s.opts...)...)
				jobs := mustClaim(t, q, []string{typ}, 1, 30*time.Second)
				if len(jobs) != 1 {
					t.Fatalf("%s: claimed %d jobs", typ, len(jobs))
				}
				before[key{s.name, p}] = jobs[0]
			}
		}
		clock.add(time.Minute) // deadlines and leases have passed
		now := clock.now()
		for _, s := range states {
			if _, _, err := q.fail(ctx, before[key{s.name, "fail"}], RetryAfter(0, errors.New("handler broke"))); err != nil {
				t.Fatalf("%s: fail: %v", s.name, err)
			}
			if stale, err := q.release(ctx, []attemptRef{before[key{s.name, "release"}].ref()}); err != nil || len(stale) != 0 {
				t.Fatalf("%s: release: stale %v, %v", s.name, stale, err)
			}
		}
		if n, err := q.Reclaim(ctx); err != nil || n != int64(len(states)) {
			t.Fatalf("Reclaim = %d, %v; want %d", n, err, len(states))
		}
		causes := map[string]endCause{"fail": handlerFailed(RetryAfter(0, errors.New("handler broke"))),
			"release": {kind: causeReleased}, "reclaim": {kind: causeReclaimed}}
		for _, s := range states {
			for _, p := range paths {
				t.Run(s.name+"/"+p, func(t *testing.T) {
					b := before[key{s.name, p}]
					e := decideOutcome(b, causes[p], now)
					if e.outcome != s.want {
						t.Fatalf("the rule says %s, the test expects %s", e.outcome, s.want)
					}
					want := *b
					want.Status, want.Error, want.ClaimToken, want.LeaseUntil = e.status, e.errText, "", nil
					want.FinishedAt = nullableTime(e.finishedAt)
					if !e.retryAt.IsZero() {
						want.ScheduledAt = e.retryAt
					}
					got := getJob(t, q, b.ID)
					if g, w := fmt.Sprintf("%+v", rowValues(got)), fmt.Sprintf("%+v", rowValues(&want)); g != w {
						t.Fatalf("row after %s:\n got %s\nwant %s", p, g, w)
					}
				})
			}
		}
	})
}

// rowValues is a row with its pointers read, for comparing rows.
func rowValues(j *JobRow) []any {
	deref := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return t.UTC()
	}
	return []any{j.ID, j.Name, j.Type, string(j.Payload), j.Status, j.Attempts, j.ClaimToken, deref(j.LeaseUntil),
		j.MaxAttempts, j.BaseDelay, j.MaxDelay, j.Error, j.ScheduledAt.UTC(), deref(j.ExpiresAt), deref(j.FinishedAt), j.CreatedAt.UTC()}
}

// TestReclaimInBatches: more abandoned attempts than one round reads are
// all ended by one Reclaim, each once.
func TestReclaimInBatches(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		const jobs = 2*reclaimBatch + 7
		args := make([]JobArgs, jobs)
		for i := range args {
			args[i] = testArgs{N: i}
		}
		if _, err := q.EnqueueMany(ctx, args); err != nil {
			t.Fatal(err)
		}
		for claimed := 0; claimed < jobs; {
			got := mustClaim(t, q, nil, maxClaim, time.Minute)
			if len(got) == 0 {
				t.Fatalf("claimed %d of %d jobs", claimed, jobs)
			}
			claimed += len(got)
		}
		clock.add(2 * time.Minute)
		if n, err := q.Reclaim(ctx); err != nil || n != jobs {
			t.Fatalf("Reclaim = %d, %v; want %d", n, err, jobs)
		}
		if n := env.countWhere(t, "status = 'pending' AND attempts = 1 AND claim_token IS NULL AND error = ?", reclaimError); n != jobs {
			t.Fatalf("%d reclaimed rows, want %d", n, jobs)
		}
		if n, err := q.Reclaim(ctx); err != nil || n != 0 {
			t.Fatalf("second Reclaim = %d, %v; want 0", n, err)
		}
	})
}

// TestReclaimOtherClientsTokens: Reclaim ends the abandoned attempts of
// another version 2 client of the table, whose claim tokens are random
// (SPEC section 3) rather than this package's "<batch>-<id>", and a full
// round of them does not hide this package's own abandoned attempts
// behind it. They were skipped, and with a round of 500 Reclaim ended
// nothing at all.
func TestReclaimOtherClientsTokens(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		args := make([]JobArgs, reclaimBatch)
		for i := range args {
			args[i] = testArgs{N: i}
		}
		if _, err := q.EnqueueMany(ctx, args, Type("other")); err != nil {
			t.Fatal(err)
		}
		if got := mustClaim(t, q, []string{"other"}, reclaimBatch, time.Minute); len(got) != reclaimBatch {
			t.Fatalf("claimed %d of %d", len(got), reclaimBatch)
		}
		// Another client's tokens, one random string for all (a pair
		// matched as "id in ids and token in tokens" would end them all
		// with one row's token).
		env.exec(t, "UPDATE {t} SET claim_token = 'c0ffee0123456789' WHERE type = 'other'")
		clock.add(time.Second)
		ours := mustEnqueue(t, q, testArgs{N: -1}, Type("ours"))
		if got := mustClaim(t, q, []string{"ours"}, 1, time.Minute); len(got) != 1 {
			t.Fatalf("claimed %d", len(got))
		}
		clock.add(5 * time.Minute) // every lease has passed
		if n, err := q.Reclaim(ctx); err != nil || n != reclaimBatch+1 {
			t.Fatalf("Reclaim = %d, %v; want %d", n, err, reclaimBatch+1)
		}
		if j := getJob(t, q, ours); j.Status != StatusPending {
			t.Errorf("this package's abandoned attempt (job %d) is %s after Reclaim, want pending", ours, j.Status)
		}
		if n := env.countWhere(t, "status = 'pending' AND claim_token IS NULL AND error = ?", reclaimError); n != reclaimBatch+1 {
			t.Fatalf("%d reclaimed rows, want %d", n, reclaimBatch+1)
		}
	})
}

// TestReclaimSparesARenewedLease: an attempt read as abandoned whose lease
// is renewed before its end is written keeps its job.
func TestReclaimSparesARenewedLease(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		id := mustEnqueue(t, q, testArgs{N: 1})
		claimed := mustClaim(t, q, nil, 1, time.Minute)
		clock.add(2 * time.Minute)
		now := clock.now()
		jobs, err := q.st.abandoned(ctx, q.run.on(nil), now, reclaimBatch)
		if err != nil || len(jobs) != 1 || jobs[0].ID != id {
			t.Fatalf("abandoned = %v, %v", ids(jobs), err)
		}
		if lost, err := q.heartbeat(ctx, []attemptRef{claimed[0].ref()}, time.Minute); err != nil || len(lost) != 0 {
			t.Fatalf("heartbeat: lost %v, %v", lost, err)
		}
		e := decideOutcome(jobs[0], endCause{kind: causeReclaimed}, now)
		if n, err := q.st.endAbandoned(ctx, q.run.on(nil), []attemptRef{jobs[0].ref()}, e, now); err != nil || n != 0 {
			t.Fatalf("endAbandoned after a heartbeat = %d, %v; want 0", n, err)
		}
		if j := getJob(t, q, id); j.Status != StatusInProgress || j.ClaimToken != claimed[0].ClaimToken {
			t.Fatalf("renewed attempt's job: %+v", j)
		}
	})
}

// nilPtrErr is an error whose Error method reads its receiver: a nil
// *nilPtrErr returned as an error panics there.
type nilPtrErr struct{ msg string }

func (e *nilPtrErr) Error() string { return e.msg }

// panicErr is an error whose Error method panics.
type panicErr struct{}

func (panicErr) Error() string { panic("boom") }

// TestErrorTextNeverPanics: the text stored for a handler's error is read
// on an executor's goroutine, where a panic ended the process: a nil
// pointer returned as a non-nil error (Go's typed-nil pitfall) and an
// Error method that panics give a text instead.
func TestErrorTextNeverPanics(t *testing.T) {
	var typedNil *nilPtrErr
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, "failed"},
		{"plain", errors.New("boom"), "boom"},
		{"empty text", errors.New(""), "failed"},
		{"typed nil", typedNil, "failed: the handler returned a nil *queue.nilPtrErr as its error"},
		{"typed nil wrapped", fmt.Errorf("send: %w", typedNil), "send: <nil>"}, // fmt printed it
		{"panicking Error", panicErr{}, "%!v(PANIC=Error method: boom)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errorText(c.err); got != c.want {
				t.Errorf("errorText = %q, want %q", got, c.want)
			}
		})
	}
}
