package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

func TestStatsListGet(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		empty, err := q.Stats(ctx, "")
		if err != nil || len(empty) != 5 {
			t.Fatalf("Stats on an empty table = %v, %v", empty, err)
		}
		for _, s := range Statuses() {
			if v, ok := empty[s]; !ok || v != 0 {
				t.Fatalf("empty stats %v lack %s", empty, s)
			}
		}
		var emails []int64
		for i := 0; i < 3; i++ {
			emails = append(emails, mustEnqueue(t, q, testArgs{N: i}, Type("email")))
		}
		other := mustEnqueue(t, q, testArgs{N: 9})
		jobs := mustClaim(t, q, []string{"email"}, 1, time.Minute)
		if _, err := q.complete(ctx, []attemptRef{jobs[0].ref()}); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, q, []string{"email"}, 1, time.Minute)

		statsCases := []struct {
			typ  string
			want map[Status]int64
		}{
			{"", map[Status]int64{StatusPending: 2, StatusInProgress: 1, StatusCompleted: 1}},
			{"email", map[Status]int64{StatusPending: 1, StatusInProgress: 1, StatusCompleted: 1}},
			{"default", map[Status]int64{StatusPending: 1}},
			{"none", map[Status]int64{}},
		}
		for _, c := range statsCases {
			t.Run(fmt.Sprintf("type %q", c.typ), func(t *testing.T) {
				got, err := q.Stats(ctx, c.typ)
				if err != nil || len(got) != 5 {
					t.Fatalf("Stats(%q) = %v, %v", c.typ, got, err)
				}
				for _, s := range Statuses() {
					if got[s] != c.want[s] {
						t.Fatalf("Stats(%q) = %v, want %v", c.typ, got, c.want)
					}
				}
			})
		}

		listCases := []struct {
			f    ListFilter
			want []int64
		}{
			{ListFilter{}, []int64{other, emails[2], emails[1], emails[0]}},
			{ListFilter{Limit: 2}, []int64{other, emails[2]}},
			{ListFilter{Type: "email"}, []int64{emails[2], emails[1], emails[0]}},
			{ListFilter{Status: StatusPending}, []int64{other, emails[2]}},
			{ListFilter{Status: StatusPending, Type: "email"}, []int64{emails[2]}},
			{ListFilter{Status: StatusFailed}, []int64{}},
		}
		for _, c := range listCases {
			t.Run(fmt.Sprintf("%+v", c.f), func(t *testing.T) {
				got, err := q.List(ctx, c.f)
				if err != nil || fmt.Sprint(ids(got)) != fmt.Sprint(c.want) {
					t.Fatalf("List(%+v) = %v, %v; want %v", c.f, ids(got), err, c.want)
				}
			})
		}
		if _, err := q.List(ctx, ListFilter{Status: "weird"}); err == nil {
			t.Fatal("List with an unknown status: no error")
		}

		j := getJob(t, q, emails[0])
		if j.Status != StatusCompleted || j.Type != "email" || j.Name != "test" {
			t.Fatalf("Get = %+v", j)
		}
		for _, c := range []struct {
			id   int64
			want error
		}{{other + 1000, ErrJobNotFound}, {0, ErrInvalidID}, {-1, ErrInvalidID}} {
			if got, err := q.Get(ctx, c.id); got != nil || !errors.Is(err, c.want) {
				t.Fatalf("Get(%d) = %v, %v; want %v", c.id, got, err, c.want)
			}
		}
	})
}

// setStatus moves a job to a status the test needs, through the queue's own
// operations.
func failForGood(t *testing.T, q *Queue, typ string) *JobRow {
	t.Helper()
	jobs := mustClaim(t, q, []string{typ}, 1, time.Minute)
	if len(jobs) != 1 {
		t.Fatalf("nothing to claim of type %s", typ)
	}
	if st, _, err := q.fail(context.Background(), jobs[0], Permanent(errors.New("broken"))); err != nil || st != StatusFailed {
		t.Fatalf("fail = %s, %v", st, err)
	}
	return jobs[0]
}

func TestRetry(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		failed := mustEnqueue(t, q, testArgs{N: 1}, Type("f"))
		failForGood(t, q, "f")
		expired := mustEnqueue(t, q, testArgs{N: 2}, Type("e"), ExpiresIn(time.Minute))
		pending := mustEnqueue(t, q, testArgs{N: 3}, Type("p"))
		running := mustEnqueue(t, q, testArgs{N: 4}, Type("r"))
		mustClaim(t, q, []string{"r"}, 1, time.Minute)
		// Failed jobs with a deadline: one still ahead after the clock moves
		// (kept by Retry), one passed by then (cleared, else the retried
		// job would expire again at once and never run).
		failedLater := mustEnqueue(t, q, testArgs{N: 6}, Type("fl"), ExpiresIn(time.Hour))
		failForGood(t, q, "fl")
		failedOverdue := mustEnqueue(t, q, testArgs{N: 7}, Type("fo"), ExpiresIn(90*time.Second))
		failForGood(t, q, "fo")
		done := mustEnqueue(t, q, testArgs{N: 5}, Type("d"))
		dj := mustClaim(t, q, []string{"d"}, 1, time.Minute)
		if stale, err := q.complete(ctx, []attemptRef{dj[0].ref()}); err != nil || len(stale) != 0 {
			t.Fatalf("complete = stale %v, %v", stale, err)
		}
		clock.add(2 * time.Minute)
		if n, err := q.ExpireOverdue(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireOverdue = %d, %v", n, err)
		}
		clock.add(time.Minute)

		cases := []struct {
			name          string
			id            int64
			want          bool
			keepsDeadline bool
		}{
			{"failed", failed, true, false},
			{"expired", expired, true, false},
			{"failed, deadline ahead", failedLater, true, true},
			{"failed, deadline passed", failedOverdue, true, false},
			{"pending", pending, false, false},
			{"running", running, false, false},
			{"completed", done, false, false},
			{"missing", done + 100, false, false},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before, err := q.Get(ctx, c.id)
				if err != nil && !(errors.Is(err, ErrJobNotFound) && c.name == "missing") {
					t.Fatalf("Get(%s): %v", c.name, err)
				}
				ok, err := q.Retry(ctx, c.id)
				if err != nil || ok != c.want {
					t.Fatalf("Retry(%s) = %v, %v; want %v", c.name, ok, err, c.want)
				}
				after, err := q.Get(ctx, c.id)
				if err != nil && !(errors.Is(err, ErrJobNotFound) && c.name == "missing") {
					t.Fatalf("Get(%s) after Retry: %v", c.name, err)
				}
				if !c.want {
					if fmt.Sprintf("%+v", before) != fmt.Sprintf("%+v", after) {
						t.Fatalf("Retry(%s) changed the job", c.name)
					}
					return
				}
				if after.Status != StatusPending || after.Attempts != 0 || after.Error != "" || after.FinishedAt != nil ||
					!after.ScheduledAt.Equal(clock.now()) || after.ClaimToken != "" {
					t.Fatalf("Retry(%s) left %+v", c.name, after)
				}
				switch {
				case c.keepsDeadline && (after.ExpiresAt == nil || !after.ExpiresAt.Equal(*before.ExpiresAt)):
					t.Fatalf("Retry(%s) changed the deadline %v to %v", c.name, before.ExpiresAt, after.ExpiresAt)
				case !c.keepsDeadline && after.ExpiresAt != nil:
					t.Fatalf("Retry(%s) kept the deadline %v", c.name, after.ExpiresAt)
				}
			})
		}
		// All of them run again.
		if got := mustClaim(t, q, []string{"f", "e", "fl", "fo"}, 10, time.Minute); len(got) != 4 {
			t.Fatalf("claimed %d retried jobs, want 4", len(got))
		}
	})
}

func TestExpireOverdue(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		soon := mustEnqueue(t, q, testArgs{N: 1}, ExpiresIn(time.Minute))
		later := mustEnqueue(t, q, testArgs{N: 2}, ExpiresIn(time.Hour))
		never := mustEnqueue(t, q, testArgs{N: 3})
		running := mustEnqueue(t, q, testArgs{N: 4}, Type("r"), ExpiresIn(time.Minute))
		mustClaim(t, q, []string{"r"}, 1, time.Hour)
		clock.add(time.Minute) // the deadline is now: it has passed
		if n, err := q.ExpireOverdue(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireOverdue = %d, %v; want 1", n, err)
		}
		if j := getJob(t, q, soon); j.Status != StatusExpired || !j.FinishedAt.Equal(clock.now()) {
			t.Fatalf("overdue job %+v", j)
		}
		for _, id := range []int64{later, never} {
			if j := getJob(t, q, id); j.Status != StatusPending {
				t.Fatalf("job %d became %s", id, j.Status)
			}
		}
		if j := getJob(t, q, running); j.Status != StatusInProgress {
			t.Fatalf("a running job became %s (Reclaim handles running ones)", j.Status)
		}
		if n, err := q.ExpireOverdue(ctx); err != nil || n != 0 {
			t.Fatalf("second ExpireOverdue = %d, %v", n, err)
		}
	})
}

func TestReclaim(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		events := newEventLog()
		q, clock := coreQueue(t, env, WithListener(events.listen))
		one := Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second})
		retry := mustEnqueue(t, q, testArgs{N: 1}, Type("a"))
		usedUp := mustEnqueue(t, q, testArgs{N: 2}, Type("a"), one)
		overdue := mustEnqueue(t, q, testArgs{N: 3}, Type("a"), ExpiresIn(time.Minute))
		mustClaim(t, q, []string{"a"}, 10, time.Minute)
		healthy := mustEnqueue(t, q, testArgs{N: 4}, Type("b"))
		mustClaim(t, q, []string{"b"}, 10, time.Hour)
		otherType := mustEnqueue(t, q, testArgs{N: 5}, Type("c"))
		mustClaim(t, q, []string{"c"}, 10, time.Minute)
		if n, err := q.Reclaim(ctx); err != nil || n != 0 {
			t.Fatalf("Reclaim before any lease ran out = %d, %v", n, err)
		}
		clock.add(2 * time.Minute)
		n, err := q.Reclaim(ctx)
		if err != nil || n != 4 {
			t.Fatalf("Reclaim = %d, %v; want 4", n, err)
		}
		// The event counts them by type and outcome (for the telemetry's
		// jobqueue.jobs.worked), sorted.
		ev := events.next(t, EventReclaimed, time.Second)
		wantReclaimed := []ReclaimedCount{
			{"a", OutcomeExpired, 1}, {"a", OutcomeFailed, 1}, {"a", OutcomeRetried, 1}, {"c", OutcomeRetried, 1},
		}
		if ev.Count != 4 || !slices.Equal(ev.Reclaimed, wantReclaimed) {
			t.Fatalf("reclaimed event: count %d, per type and outcome %v; want 4, %v", ev.Count, ev.Reclaimed, wantReclaimed)
		}
		cases := []struct {
			id       int64
			status   Status
			finished bool
		}{
			{retry, StatusPending, false},
			{usedUp, StatusFailed, true},
			{overdue, StatusExpired, true},
			{healthy, StatusInProgress, false},
			{otherType, StatusPending, false},
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("job %d %s", c.id, c.status), func(t *testing.T) {
				j := getJob(t, q, c.id)
				if j.Status != c.status || (j.FinishedAt != nil) != c.finished {
					t.Fatalf("job %d: %s finished %v, want %s", c.id, j.Status, j.FinishedAt, c.status)
				}
				if c.status == StatusInProgress {
					return
				}
				if j.ClaimToken != "" || j.LeaseUntil != nil || j.Error != reclaimError {
					t.Fatalf("reclaimed job %+v", j)
				}
				if c.finished && !j.FinishedAt.Equal(clock.now()) || c.status == StatusPending && !j.ScheduledAt.Equal(clock.now()) {
					t.Fatalf("reclaimed job times %+v (now %v)", j, clock.now())
				}
			})
		}
		if got := mustClaim(t, q, []string{"a"}, 10, time.Minute); len(got) != 1 || got[0].ID != retry || got[0].Attempts != 2 {
			t.Fatalf("after Reclaim claimed %v", ids(got))
		}
		if events.count(EventReclaimed) != 1 {
			t.Fatalf("%d reclaimed events", events.count(EventReclaimed))
		}
	})
}

func TestPrune(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		var sc stmtCounter
		q, clock := coreQueue(t, env, withStatementHook(sc.observe))
		// 2100 completed two days ago, one failed and one expired two days
		// ago, and recent or unfinished ones that stay.
		args := make([]JobArgs, 2100)
		for i := range args {
			args[i] = testArgs{N: i}
		}
		if _, err := q.EnqueueMany(ctx, args, Type("old")); err != nil {
			t.Fatal(err)
		}
		for {
			jobs := mustClaim(t, q, []string{"old"}, 1000, time.Minute)
			if len(jobs) == 0 {
				break
			}
			refs := make([]attemptRef, len(jobs))
			for i, j := range jobs {
				refs[i] = j.ref()
			}
			if _, err := q.complete(ctx, refs); err != nil {
				t.Fatal(err)
			}
		}
		mustEnqueue(t, q, testArgs{}, Type("f"))
		failForGood(t, q, "f")
		mustEnqueue(t, q, testArgs{}, ExpiresIn(time.Second), Type("e"))
		clock.add(time.Second)
		if n, err := q.ExpireOverdue(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireOverdue = %d, %v; want 1 job expired", n, err)
		}
		clock.add(48 * time.Hour)
		recent := mustEnqueue(t, q, testArgs{}, Type("r"))
		rj := mustClaim(t, q, []string{"r"}, 1, time.Minute)
		if stale, err := q.complete(ctx, []attemptRef{rj[0].ref()}); err != nil || len(stale) != 0 {
			t.Fatalf("complete = stale %v, %v; want the job completed", stale, err)
		}
		pending := mustEnqueue(t, q, testArgs{})
		running := mustEnqueue(t, q, testArgs{}, Type("run"))
		mustClaim(t, q, []string{"run"}, 1, time.Minute)

		sc.reset()
		n, err := q.Prune(ctx, 24*time.Hour)
		if err != nil || n != 2102 {
			t.Fatalf("Prune = %d, %v; want 2102", n, err)
		}
		// The statements on the side table of unique keys (a look whether it
		// exists, one batch of its rows whose jobs are gone) come on top.
		if s := sc.count() - sc.countWith("_unique"); s != 3 {
			t.Errorf("Prune of 2102 rows took %d statements on the jobs table, want 3 batches of at most %d", s, MaintenanceBatch)
		}
		if s := sc.countWith("_unique"); s > 2 {
			t.Errorf("Prune took %d statements on the side table, want at most 2", s)
		}
		if left := rowCount(t, env); left != 3 {
			t.Fatalf("%d rows left, want 3", left)
		}
		for _, id := range []int64{recent, pending, running} {
			getJob(t, q, id)
		}
		if n, err := q.Prune(ctx, 24*time.Hour); err != nil || n != 0 {
			t.Fatalf("second Prune = %d, %v", n, err)
		}
		if _, err := q.Prune(ctx, -time.Hour); err == nil {
			t.Fatal("Prune with a negative age: no error")
		}
		if n, err := q.Purge(ctx); err != nil || n != 3 || rowCount(t, env) != 0 {
			t.Fatalf("Purge = %d, %v", n, err)
		}
	})
}
