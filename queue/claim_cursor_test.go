package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestClaimWatermarkLosesNoJob: a claimer claims past its watermark (the
// last job it claimed), so a job that becomes due behind it (an At() in the
// past, an attempt released by a process whose clock is behind, an enqueue
// committed late) is not read by the
// next claims; it is claimed as soon as a claim past the watermark finds
// nothing, or by the rescan from the start after claimRescanEvery (the
// queue's clock, moved by the test). Every step names the jobs it must
// claim, in order; the ones it must not show that the watermark is used.
func TestClaimWatermarkLosesNoJob(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		now := clock.now()
		at := func(d time.Duration) EnqueueOption { return At(now.Add(d)) }
		cur := &claimCursor{q: q, lease: time.Minute}
		t.Cleanup(cur.closeSession)

		a1 := mustEnqueue(t, q, testArgs{N: 1}, at(-10*time.Minute))
		a2 := mustEnqueue(t, q, testArgs{N: 2}, at(-9*time.Minute))
		a3 := mustEnqueue(t, q, testArgs{N: 3}, at(-8*time.Minute))
		a4 := mustEnqueue(t, q, testArgs{N: 4}, at(-7*time.Minute))
		var late, past, r1, r2, early, s1, s2, idle, behind int64
		var released *JobRow

		steps := []struct {
			name    string
			before  func()
			advance time.Duration
			max     int
			want    func() []int64
		}{
			{name: "from the start", max: 2, want: func() []int64 { return []int64{a1, a2} }},
			{name: "past the watermark, not the job At() put behind it", max: 2, before: func() {
				late = mustEnqueue(t, q, testArgs{N: 5}, at(-20*time.Minute))
				past = mustEnqueue(t, q, testArgs{N: 6}, at(-6*time.Minute))
			}, want: func() []int64 { return []int64{a3, a4} }},
			{name: "a short claim past the watermark", max: 2, want: func() []int64 { return []int64{past} }},
			{name: "nothing past the watermark: at once from the start", max: 2, want: func() []int64 { return []int64{late} }},
			{name: "a job to release", max: 1, before: func() {
				r1 = mustEnqueue(t, q, testArgs{N: 7}, at(-5*time.Minute))
				r2 = mustEnqueue(t, q, testArgs{N: 8}, at(-4*time.Minute))
			}, want: func() []int64 { return []int64{r1} }},
			{name: "past the released job", max: 1, before: func() {
				// Released by a process whose clock is 10 minutes behind:
				// pending again at its now, behind the watermark.
				clock.add(-10 * time.Minute)
				defer clock.add(10 * time.Minute)
				if stale, err := q.release(ctx, []attemptRef{released.ref()}); err != nil || len(stale) != 0 {
					t.Fatalf("release(%d) = %v, %v", released.ID, stale, err)
				}
				if j := getJob(t, q, r1); j.Status != StatusPending || !j.ScheduledAt.Equal(now.Add(-10*time.Minute)) {
					t.Fatalf("released job %d is %s at %v", r1, j.Status, j.ScheduledAt)
				}
			}, want: func() []int64 { return []int64{r2} }},
			{name: "the released job, from the start", max: 1, want: func() []int64 { return []int64{r1} }},
			{name: "past the watermark again", max: 1, before: func() {
				early = mustEnqueue(t, q, testArgs{N: 9}, at(-30*time.Minute))
				s1 = mustEnqueue(t, q, testArgs{N: 10}, at(-2*time.Minute))
				s2 = mustEnqueue(t, q, testArgs{N: 11}, at(-time.Minute))
			}, want: func() []int64 { return []int64{s1} }},
			{name: "the periodic rescan", max: 1, advance: claimRescanEvery, want: func() []int64 { return []int64{early} }},
			{name: "on from the rescan's last job", max: 1, want: func() []int64 { return []int64{s2} }},
			{name: "nothing left", max: 2, want: func() []int64 { return []int64{} }},
			{name: "nothing left again: the watermark stays", max: 2, want: func() []int64 {
				if !cur.set || cur.pos.id != s2 {
					t.Errorf("after empty claims the watermark is %+v (set %v), want the one after job %d", cur.pos, cur.set, s2)
				}
				return []int64{}
			}},
			{name: "a job enqueued while idle, past the watermark", max: 2, before: func() {
				idle = mustEnqueue(t, q, testArgs{N: 12}, at(-30*time.Second))
			}, want: func() []int64 { return []int64{idle} }},
			{name: "one behind it, from the start at once", max: 2, before: func() {
				behind = mustEnqueue(t, q, testArgs{N: 13}, at(-40*time.Minute))
			}, want: func() []int64 { return []int64{behind} }},
		}
		for i, s := range steps {
			if s.before != nil {
				s.before()
			}
			clock.add(s.advance)
			jobs, err := cur.claim(ctx, s.max)
			if err != nil {
				t.Fatalf("step %d (%s): %v", i, s.name, err)
			}
			if got, want := fmt.Sprint(ids(jobs)), fmt.Sprint(s.want()); got != want {
				t.Fatalf("step %d (%s): claimed %s, want %s", i, s.name, got, want)
			}
			if len(jobs) == 1 && jobs[0].ID == r1 && released == nil {
				released = jobs[0]
			}
		}
		if n := env.countWhere(t, "status = 'pending'"); n != 0 {
			t.Fatalf("%d jobs still pending", n)
		}
	})
}

// TestClaimCursorRescansAfterClockSteps: a claimer scans from the start at
// least every claimRescanEvery, whatever its wall clock does. The time of
// the next rescan was kept on the wall clock, so after a step back (NTP
// correcting a clock that ran ahead) no rescan came until the clock had
// caught up with it again; while a backlog kept the claims past the
// watermark busy, a job behind it (a reclaimed or released one, an At() in
// the past) waited as long as the step.
func TestClaimCursorRescansAfterClockSteps(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name   string
		now    time.Time // of the next claim, the last from the start having run at t0
		rescan bool
	}{
		{"at once", t0, false},
		{"before the period", t0.Add(claimRescanEvery / 2), false},
		{"after the period", t0.Add(claimRescanEvery), true},
		{"clock forward 1h", t0.Add(time.Hour), true},
		{"clock back a little", t0.Add(-claimRescanEvery / 2), true},
		{"clock back 2 periods", t0.Add(-2 * claimRescanEvery), true},
		{"clock back 1h", t0.Add(-time.Hour), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &claimCursor{}
			c.advance([]*JobRow{{ID: 7, ScheduledAt: t0.Add(-time.Hour)}}, true, t0)
			after, fromStart := c.plan(tc.now)
			if fromStart != tc.rescan {
				t.Fatalf("plan at %v after a scan from the start at %v: from the start %v, want %v", tc.now, t0, fromStart, tc.rescan)
			}
			if !fromStart && (after.id != 7 || !after.at.Equal(t0.Add(-time.Hour))) {
				t.Fatalf("plan starts after %+v, not after the last job claimed", after)
			}
		})
	}
}
