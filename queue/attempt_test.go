package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// ids lists the ids of jobs.
func ids(jobs []*JobRow) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func TestClaimOrderTypesAndDeadlines(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		now := clock.now()
		a := mustEnqueue(t, q, testArgs{N: 1}, At(now.Add(-2*time.Minute)))
		b := mustEnqueue(t, q, testArgs{N: 2}, Type("email"), At(now.Add(-3*time.Minute)))
		c := mustEnqueue(t, q, testArgs{N: 3}, Type("sms"), At(now.Add(-time.Minute)))
		d := mustEnqueue(t, q, testArgs{N: 4}, Type("email"), At(now.Add(time.Hour)))
		mustEnqueue(t, q, testArgs{N: 5}, At(now.Add(-5*time.Minute)), ExpiresAt(now.Add(-4*time.Minute)))
		f := mustEnqueue(t, q, testArgs{N: 6}, At(now.Add(-2*time.Minute)))
		g := mustEnqueue(t, q, testArgs{N: 7}, Type("sms"), ExpiresAt(now.Add(time.Hour)))

		steps := []struct {
			types   []string
			max     int
			advance time.Duration
			want    []int64
		}{
			{types: []string{"email"}, max: 10, want: []int64{b}},
			{types: []string{"sms", "default"}, max: 2, want: []int64{a, f}},
			{types: nil, max: 10, want: []int64{c, g}},
			{types: nil, max: 10, want: []int64{}},
			{types: []string{"nope"}, max: 10, want: []int64{}},
			{types: []string{"email"}, max: 10, advance: 2 * time.Hour, want: []int64{d}},
			{types: nil, max: 10, want: []int64{}},
		}
		tokens := map[string]bool{}
		for i, s := range steps {
			clock.add(s.advance)
			lease := time.Duration(i+1) * time.Minute
			jobs := mustClaim(t, q, s.types, s.max, lease)
			if fmt.Sprint(ids(jobs)) != fmt.Sprint(s.want) {
				t.Fatalf("step %d: claimed %v, want %v", i, ids(jobs), s.want)
			}
			for _, j := range jobs {
				if j.Status != StatusInProgress || j.Attempts != 1 || j.ClaimToken == "" || len(j.ClaimToken) > 64 || tokens[j.ClaimToken] {
					t.Fatalf("step %d: claimed %+v", i, j)
				}
				tokens[j.ClaimToken] = true
				if j.LeaseUntil == nil || !j.LeaseUntil.Equal(clock.now().Add(lease)) {
					t.Fatalf("step %d: lease_until %v, want %v", i, j.LeaseUntil, clock.now().Add(lease))
				}
				// What claim returns is what the table holds.
				row := getJob(t, q, j.ID)
				if fmt.Sprint(*row.LeaseUntil, row.ClaimToken, row.Status, row.Attempts, row.ScheduledAt) !=
					fmt.Sprint(*j.LeaseUntil, j.ClaimToken, j.Status, j.Attempts, j.ScheduledAt) || string(row.Payload) != string(j.Payload) {
					t.Fatalf("step %d: claim returned %+v, table holds %+v", i, j, row)
				}
			}
		}
	})
}

func TestConcurrentClaimsNeverShareAJob(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		const total = 300
		args := make([]JobArgs, total)
		for i := range args {
			args[i] = testArgs{N: i}
		}
		if _, err := q.EnqueueMany(ctx, args); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		seen := map[int64]int{}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := 0; w < 4; w++ {
			// Each claimer has its own pool, as another process would.
			qw, _ := coreQueue(t, env)
			if kind != engine.SQLite {
				qw = env.queue(t, env.newPool(t), WithLogger(q.logger))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					jobs, err := qw.claim(ctx, nil, 7, time.Minute)
					if err != nil {
						errs <- err
						return
					}
					if len(jobs) == 0 {
						return
					}
					mu.Lock()
					for _, j := range jobs {
						seen[j.ID]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(seen) != total {
			t.Fatalf("%d distinct jobs claimed, want %d", len(seen), total)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("job %d claimed %d times", id, n)
			}
		}
	})
}

func TestFencingRefusesStaleAttempts(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		mustEnqueue(t, q, testArgs{N: 1})
		old := mustClaim(t, q, nil, 1, time.Minute)[0]
		clock.add(2 * time.Minute)
		if n, err := q.Reclaim(ctx); err != nil || n != 1 {
			t.Fatalf("Reclaim = %d, %v", n, err)
		}
		clock.add(time.Second)
		cur := mustClaim(t, q, nil, 1, time.Minute)[0]
		if cur.ID != old.ID || cur.ClaimToken == old.ClaimToken || cur.Attempts != 2 {
			t.Fatalf("second claim %+v after %+v", cur, old)
		}
		before := getJob(t, q, cur.ID)
		clock.add(time.Second)

		lost, err := q.heartbeat(ctx, []attemptRef{old.ref(), cur.ref()}, time.Hour)
		if err != nil || len(lost) != 1 || lost[0] != old.ref() {
			t.Fatalf("heartbeat: lost %v, %v; want the old attempt", lost, err)
		}
		// Only the current attempt's lease moved, and nothing else of its job.
		got := getJob(t, q, cur.ID)
		if got.LeaseUntil == nil || !got.LeaseUntil.Equal(clock.now().Add(time.Hour)) {
			t.Fatalf("current lease %v, want %v", got.LeaseUntil, clock.now().Add(time.Hour))
		}
		moved := *got
		moved.LeaseUntil = before.LeaseUntil
		if fmt.Sprintf("%+v", moved) != fmt.Sprintf("%+v", *before) {
			t.Fatalf("the heartbeat changed more than the lease:\n%+v\n%+v", before, got)
		}
		before = got

		stale, err := q.complete(ctx, []attemptRef{old.ref()})
		if err != nil || len(stale) != 1 || stale[0] != old.ref() {
			t.Fatalf("complete(old): stale %v, %v", stale, err)
		}
		if _, _, err := q.fail(ctx, old, errors.New("late")); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("fail(old) = %v, want ErrLeaseLost", err)
		}
		if after := getJob(t, q, cur.ID); fmt.Sprintf("%+v", *after) != fmt.Sprintf("%+v", *before) {
			t.Fatalf("stale attempts changed the job:\n%+v\n%+v", before, after)
		}
		// Unknown ids and tokens are stale too.
		stale, err = q.complete(ctx, []attemptRef{{ID: cur.ID + 100, Token: cur.ClaimToken}, {ID: cur.ID, Token: ""}})
		if err != nil || len(stale) != 2 {
			t.Fatalf("complete(unknown): stale %v, %v", stale, err)
		}
		// The current attempt still completes.
		stale, err = q.complete(ctx, []attemptRef{cur.ref()})
		if err != nil || len(stale) != 0 {
			t.Fatalf("complete(current): stale %v, %v", stale, err)
		}
		done := getJob(t, q, cur.ID)
		if done.Status != StatusCompleted || done.ClaimToken != "" || done.LeaseUntil != nil || !done.FinishedAt.Equal(clock.now()) {
			t.Fatalf("completed job %+v", done)
		}
		// Completing twice is stale, and so is failing after completing.
		if stale, err := q.complete(ctx, []attemptRef{cur.ref()}); err != nil || len(stale) != 1 {
			t.Fatalf("a second completion: stale %v, %v; want it stale", stale, err)
		}
		if _, _, err := q.fail(ctx, cur, errors.New("x")); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("fail after complete = %v", err)
		}
	})
}

func TestHeartbeatAndCompleteInBatches(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		args := make([]JobArgs, 1500)
		for i := range args {
			args[i] = testArgs{N: i}
		}
		if _, err := q.EnqueueMany(ctx, args); err != nil {
			t.Fatal(err)
		}
		var jobs []*JobRow
		for len(jobs) < 1500 {
			got := mustClaim(t, q, nil, 1000, time.Minute)
			if len(got) == 0 {
				t.Fatalf("only %d claimed", len(jobs))
			}
			jobs = append(jobs, got...)
		}
		refs := make([]attemptRef, len(jobs))
		for i, j := range jobs {
			refs[i] = j.ref()
		}
		// A heartbeat at the claim's own second changes no lease (MySQL
		// counts changed rows): nothing is lost all the same.
		if lost, err := q.heartbeat(ctx, refs, time.Minute); err != nil || len(lost) != 0 {
			t.Fatalf("heartbeat at once: lost %d, %v", len(lost), err)
		}
		clock.add(30 * time.Second)
		if lost, err := q.heartbeat(ctx, refs, time.Minute); err != nil || len(lost) != 0 {
			t.Fatalf("heartbeat: lost %d, %v", len(lost), err)
		}
		if n := env.countWhere(t, "lease_until = ?", kind.TimeArg(clock.now().Add(time.Minute))); n != 1500 {
			t.Fatalf("%d leases extended, want 1500", n)
		}
		stale, err := q.complete(ctx, refs)
		if err != nil || len(stale) != 0 {
			t.Fatalf("complete: %d stale, %v", len(stale), err)
		}
		if n := env.countWhere(t, "status = 'completed' AND claim_token IS NULL AND lease_until IS NULL AND finished_at IS NOT NULL"); n != 1500 {
			t.Fatalf("%d completed, want 1500", n)
		}
	})
}

func TestDeleteOnSuccess(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env, WithDeleteOnSuccess(true))
		mustEnqueue(t, q, testArgs{N: 1})
		mustEnqueue(t, q, testArgs{N: 2})
		jobs := mustClaim(t, q, nil, 2, time.Minute)
		stale, err := q.complete(ctx, []attemptRef{jobs[0].ref(), {ID: jobs[1].ID, Token: "stale"}})
		if err != nil || len(stale) != 1 || stale[0].ID != jobs[1].ID {
			t.Fatalf("complete: stale %v, %v", stale, err)
		}
		if _, err := q.Get(ctx, jobs[0].ID); !errors.Is(err, ErrJobNotFound) {
			t.Fatalf("Get(deleted) = %v, want ErrJobNotFound", err)
		}
		if j := getJob(t, q, jobs[1].ID); j.Status != StatusInProgress {
			t.Fatalf("stale ref's job is %s", j.Status)
		}
	})
}

func TestFailWritesTheOutcome(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		pol := Policy(RetryPolicy{MaxAttempts: 2, BaseDelay: 10 * time.Second, MaxDelay: 15 * time.Second})
		cases := []struct {
			name    string
			opts    []EnqueueOption
			runs    int // failed attempts before the one checked
			err     error
			status  Status
			next    time.Duration
			errText string
		}{
			{name: "retry with backoff", opts: []EnqueueOption{pol}, err: errors.New("first"), status: StatusPending, next: 10 * time.Second, errText: "first"},
			{name: "second attempt fails", opts: []EnqueueOption{pol}, runs: 1, err: errors.New("second"), status: StatusFailed, errText: "second"},
			{name: "permanent", opts: []EnqueueOption{pol}, err: Permanent(errors.New("bad input")), status: StatusFailed, errText: "bad input"},
			{name: "retry after", opts: []EnqueueOption{pol}, err: RetryAfter(3*time.Second, errors.New("later")), status: StatusPending, next: 3 * time.Second, errText: "later"},
			{name: "expired", opts: []EnqueueOption{pol, ExpiresIn(time.Second)}, err: errors.New("slow"), status: StatusExpired, errText: "slow"},
			{name: "long error trimmed", opts: []EnqueueOption{pol}, err: errors.New(strings.Repeat("é", 5000)), status: StatusPending, next: 10 * time.Second},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				id := mustEnqueue(t, q, testArgs{N: 1}, append([]EnqueueOption{Type(strings.ReplaceAll(c.name, " ", "_"))}, c.opts...)...)
				for r := 0; r <= c.runs; r++ {
					if r > 0 {
						clock.add(time.Minute)
					}
					jobs := mustClaim(t, q, []string{strings.ReplaceAll(c.name, " ", "_")}, 1, time.Minute)
					if len(jobs) != 1 || jobs[0].ID != id {
						t.Fatalf("%s: claimed %v", c.name, ids(jobs))
					}
					if c.status == StatusExpired {
						clock.add(2 * time.Second)
					}
					err := c.err
					if r < c.runs {
						err = errors.New("earlier")
					}
					st, next, ferr := q.fail(ctx, jobs[0], err)
					if ferr != nil {
						t.Fatalf("%s: fail: %v", c.name, ferr)
					}
					if r < c.runs {
						continue
					}
					j := getJob(t, q, id)
					if st != c.status || j.Status != c.status || j.ClaimToken != "" || j.LeaseUntil != nil {
						t.Fatalf("%s: fail → %s, row %+v; want %s", c.name, st, j, c.status)
					}
					if c.status == StatusPending {
						if !next.Equal(clock.now().Add(c.next)) || !j.ScheduledAt.Equal(next) || j.FinishedAt != nil {
							t.Errorf("%s: next %v, scheduled_at %v, finished_at %v; want %v", c.name, next, j.ScheduledAt, j.FinishedAt, clock.now().Add(c.next))
						}
					} else if j.FinishedAt == nil || !j.FinishedAt.Equal(clock.now()) || !next.IsZero() {
						t.Errorf("%s: finished_at %v, next %v", c.name, j.FinishedAt, next)
					}
					if c.errText != "" && j.Error != c.errText {
						t.Errorf("%s: error %q, want %q", c.name, j.Error, c.errText)
					}
					if c.errText == "" && (len(j.Error) > maxErrorLen || len(j.Error) < maxErrorLen-8 || !utf8.ValidString(j.Error)) {
						t.Errorf("%s: stored error of %d bytes (valid UTF-8: %v), want about %d", c.name, len(j.Error), utf8.ValidString(j.Error), maxErrorLen)
					}
				}
			})
		}
	})
}

func TestSQLiteBusyIsRetriedThenReturned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := coreEnv(t, engine.SQLite)
	// A pool without busy_timeout, so that a held write lock fails at once.
	path := strings.TrimPrefix(env.url, "sqlite:")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// onClaim, when set, runs before each claim statement is sent.
	var onClaim atomic.Pointer[func()]
	hook := func(query string, _ sqlRunner) {
		if f := onClaim.Load(); f != nil && strings.Contains(query, "-- name: ClaimJobs") {
			(*f)()
		}
	}
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()), withStatementHook(hook))
	mustEnqueue(t, q, testArgs{N: 1})
	lock := func() *sql.Conn {
		c, err := env.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Held for the whole claim: retried, then the busy error is returned.
	c := lock()
	start := time.Now()
	_, err = q.claim(ctx, nil, 1, time.Minute)
	if !isSQLiteBusy(err) {
		t.Fatalf("claim under a held lock = %v, want a busy error", err)
	}
	if waited := time.Since(start); waited < sqliteBusyWait*(1<<(sqliteBusyTries-1)-1) {
		t.Fatalf("gave up after %v: not retried", waited)
	}
	if _, err := c.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatalf("releasing the lock: %v", err)
	}
	c.Close()
	// Released during the retries (just before the second try, once the
	// first has failed busy): the claim succeeds.
	c = lock()
	tries := 0
	release := func() {
		tries++
		if tries == 2 {
			if _, err := c.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Errorf("ROLLBACK: %v", err)
			}
			c.Close()
		}
	}
	onClaim.Store(&release)
	jobs, err := q.claim(ctx, nil, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim after the lock went = %v, %v", jobs, err)
	}
	if tries < 2 {
		t.Fatalf("the claim succeeded at try %d, while the lock was held", tries)
	}
}

// TestMixedBatchWritesOnlyTheHeld: a batch of attempts of which some no
// longer hold their jobs (one cancelled, one completed already), as the
// completer's and a shutdown's batches may be, ends the attempts that hold
// theirs and reports the others stale, changing nothing of their jobs (on
// MySQL the path that locks the held rows in a second transaction).
func TestMixedBatchWritesOnlyTheHeld(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		cases := []struct {
			name string
			end  func(q *Queue, refs []attemptRef) ([]attemptRef, error)
			want Status // of the jobs whose attempts held them
		}{
			{"complete", func(q *Queue, refs []attemptRef) ([]attemptRef, error) { return q.complete(ctx, refs) }, StatusCompleted},
			{"release", func(q *Queue, refs []attemptRef) ([]attemptRef, error) { return q.release(ctx, refs) }, StatusPending},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				env := coreEnv(t, kind)
				q, clock := coreQueue(t, env)
				for i := range 4 {
					mustEnqueue(t, q, testArgs{N: i})
				}
				jobs := mustClaim(t, q, nil, 4, time.Minute)
				if len(jobs) != 4 {
					t.Fatalf("claimed %d jobs, want 4", len(jobs))
				}
				held, cancelled, done := []*JobRow{jobs[0], jobs[3]}, jobs[1], jobs[2]
				if err := q.Cancel(ctx, cancelled.ID); err != nil {
					t.Fatal(err)
				}
				if stale, err := q.complete(ctx, []attemptRef{done.ref()}); err != nil || len(stale) != 0 {
					t.Fatalf("complete(%d) = stale %v, %v", done.ID, stale, err)
				}
				untouched := map[int64]string{}
				for _, j := range []*JobRow{cancelled, done} {
					untouched[j.ID] = fmt.Sprintf("%+v", jobView(getJob(t, q, j.ID)))
				}
				clock.add(time.Second)

				stale, err := c.end(q, []attemptRef{jobs[0].ref(), jobs[1].ref(), jobs[2].ref(), jobs[3].ref()})
				if err != nil {
					t.Fatal(err)
				}
				got := map[attemptRef]bool{}
				for _, r := range stale {
					got[r] = true
				}
				if want := map[attemptRef]bool{cancelled.ref(): true, done.ref(): true}; !cmp.Equal(got, want) {
					t.Errorf("stale %v, want the cancelled and the completed attempts %v", stale, []attemptRef{cancelled.ref(), done.ref()})
				}
				for _, j := range held {
					if row := getJob(t, q, j.ID); row.Status != c.want || row.ClaimToken != "" || row.LeaseUntil != nil {
						t.Errorf("job %d after %s: %+v; want %s, no token, no lease", j.ID, c.name, jobView(row), c.want)
					}
				}
				for id, before := range untouched {
					if after := fmt.Sprintf("%+v", jobView(getJob(t, q, id))); after != before {
						t.Errorf("job %d of a stale attempt changed:\n%s\nwant\n%s", id, after, before)
					}
				}
			})
		}
	})
}
