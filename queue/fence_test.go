package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
	"github.com/jobqueue/jobqueue/queue/cron"
)

// The database's fence of a leader's acts (fence.go).

// openFence returns an open process-side guard.
func openFence() error { return nil }

// takeLease makes holder lead q's table for lease, as a worker's elector
// would, and returns the fence of its term.
func takeLease(t *testing.T, q *Queue, holder string, lease time.Duration) *termFence {
	t.Helper()
	ctx := context.Background()
	if err := q.st.leaderEnsure(ctx, leaderRole); err != nil {
		t.Fatal(err)
	}
	// A statement kept waiting by another's act fails at its deadline.
	var last error
	testwait.Until(t, 10*time.Second, 20*time.Millisecond, func() bool {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		ok, err := q.st.leaderAcquire(cctx, leaderRole, holder, lease)
		if err != nil {
			last = err
		}
		return ok && err == nil
	}, func() string {
		return fmt.Sprintf("%s did not take the lease within 10 s (last error: %v)", holder, last)
	})
	r, err := q.st.leaderGet(ctx, leaderRole)
	if err != nil || r == nil || r.holder != holder {
		t.Fatalf("leader row after %s took it: %+v, %v", holder, r, err)
	}
	return &termFence{holder: holder, term: r.term, idle: time.Second, guard: openFence}
}

// leaderActs are the acts of a leader, each run fenced by f.
func leaderActs(q *Queue, retention time.Duration) []struct {
	name string
	run  func(ctx context.Context, f *termFence) error
} {
	tick := time.Now().UTC().Truncate(time.Minute)
	p := Periodic("report", cron.MustParse("@every 1m"), kindArgs{K: "report"}, Type("periodic"))
	return []struct {
		name string
		run  func(ctx context.Context, f *termFence) error
	}{
		{"expire batch", func(ctx context.Context, f *termFence) error { _, err := q.expireOverdue(ctx, f); return err }},
		{"reclaim round", func(ctx context.Context, f *termFence) error { _, err := q.reclaim(ctx, f); return err }},
		{"prune batch", func(ctx context.Context, f *termFence) error { _, err := q.prune(ctx, retention, f); return err }},
		{"tick enqueue", func(ctx context.Context, f *termFence) error {
			return q.leaderAct(ctx, f, func(d dbtx) error {
				_, _, err := q.enqueueTick(ctx, d.tx, p, tick)
				return err
			})
		}},
	}
}

// TestStaleTermChangesNothing: a leader whose term moved (another Queue,
// as another process, took the leader row over while the first still
// holds its old term, and its process-side guard still says it leads)
// changes nothing with its next expire batch, Reclaim round, prune batch
// or tick enqueue: each fails with errTermEnded. Nor does a holder whose
// lease passed by the server's clock. The holder of the current term
// changes all of it.
func TestStaleTermChangesNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		q, clock := coreQueue(t, env)
		other := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger())) // another process

		// 3 overdue pending jobs, 2 abandoned attempts, 4 old finished jobs.
		for range 3 {
			mustEnqueue(t, q, testArgs{}, ExpiresIn(time.Second))
		}
		for range 6 {
			mustEnqueue(t, q, testArgs{}, Type("run"))
		}
		running := mustClaim(t, q, []string{"run"}, 6, time.Minute)
		var refs []attemptRef
		for _, j := range running[:4] {
			refs = append(refs, j.ref())
		}
		if _, err := q.complete(ctx, refs); err != nil {
			t.Fatal(err)
		}
		clock.add(48 * time.Hour)
		state := func() string {
			return strings.Join([]string{
				"pending " + itoa(env.countWhere(t, "status = 'pending'")),
				"expired " + itoa(env.countWhere(t, "status = 'expired'")),
				"in_progress " + itoa(env.countWhere(t, "status = 'in_progress'")),
				"completed " + itoa(env.countWhere(t, "status = 'completed'")),
				"reports " + itoa(env.countWhere(t, "name = 'report'")),
			}, ", ")
		}
		before := state()
		const want = "pending 3, expired 0, in_progress 2, completed 4, reports 0"
		if before != want {
			t.Fatalf("rows before: %s; want %s", before, want)
		}

		stale := takeLease(t, q, "first", time.Minute)
		// The second process takes the row over: the first's lease is
		// released (as if it had passed), and the term moves on.
		if err := q.st.leaderRelease(ctx, leaderRole, "first"); err != nil {
			t.Fatal(err)
		}
		current := takeLease(t, other, "second", time.Minute)
		if current.term <= stale.term {
			t.Fatalf("term %d after the takeover of term %d", current.term, stale.term)
		}
		// The first holder's lease passed without a takeover: refused too.
		lapsed := *current
		lapsed.holder = "first"

		for _, act := range leaderActs(q, 24*time.Hour) {
			t.Run(act.name, func(t *testing.T) {
				for _, f := range []*termFence{stale, &lapsed} {
					if err := act.run(ctx, f); !errors.Is(err, errTermEnded) {
						t.Fatalf("%s as %s in term %d = %v; want errTermEnded", act.name, f.holder, f.term, err)
					}
					if after := state(); after != before {
						t.Fatalf("%s as %s in stale term %d changed the rows: %s; want %s", act.name, f.holder, f.term, after, before)
					}
				}
			})
		}
		// The current term's acts (run through q's pool: the fence reads
		// the row, whichever process sends them) change everything.
		current.guard = openFence
		for _, act := range leaderActs(q, 24*time.Hour) {
			if err := act.run(ctx, current); err != nil {
				t.Fatalf("%s in the current term: %v", act.name, err)
			}
		}
		// The overdue jobs expired (finished at the test clock's now: not
		// pruned), the abandoned attempts are pending again, the old
		// completed jobs pruned, the tick's job pending.
		if after, want := state(), "pending 3, expired 3, in_progress 0, completed 0, reports 1"; after != want {
			t.Fatalf("rows after the current term's acts: %s; want %s", after, want)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestTakeoverWaitsForAct: an act in flight (its fence passed) keeps a
// takeover waiting, even once its lease passed by the server's clock: the
// second process cannot take the lease until the act has committed, and
// then does; the act's writes all landed in the old term.
func TestTakeoverWaitsForAct(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		q, _ := coreQueue(t, env)
		other := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()))
		mustEnqueue(t, q, testArgs{}, ExpiresIn(time.Millisecond))

		f := takeLease(t, q, "first", 2*time.Second)
		f.idle = time.Minute // this act is not paused: it waits on purpose
		fenced, release := make(chan struct{}), make(chan struct{})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		defer releaseOnce() // also when the test fails: the act holds a connection
		done := make(chan error, 1)
		go func() {
			done <- q.leaderAct(ctx, f, func(d dbtx) error {
				close(fenced)
				<-release
				_, err := q.st.expire(ctx, d, time.Now().Add(time.Hour), MaintenanceBatch)
				return err
			})
		}()
		waitFor(t, fenced, 10*time.Second, "the act's fence")
		waitUntil(t, 10*time.Second, "the lease to pass by the server's clock", func() bool {
			ld, err := other.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return !ld.Active
		})
		for range 3 {
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			ok, err := other.st.leaderAcquire(cctx, leaderRole, "second", time.Minute)
			cancel()
			if ok && err == nil {
				t.Fatalf("the second process took the lease while the first's act was in flight")
			}
		}
		releaseOnce()
		if err := waitFor(t, done, 10*time.Second, "the act"); err != nil {
			t.Fatalf("the act: %v", err)
		}
		if n := env.countWhere(t, "status = 'expired'"); n != 1 {
			t.Fatalf("%d jobs expired by the act; want 1", n)
		}
		next := takeLease(t, other, "second", time.Minute)
		if next.term <= f.term {
			t.Fatalf("term %d after the takeover of term %d", next.term, f.term)
		}
	})
}

// TestPausedActLosesItsSession: a leader paused inside an act (its fence
// passed, then nothing sent for longer than its idle bound) does not keep
// the takeover waiting: the server ends its session, the takeover goes
// through once the lease passed, and the act, resumed, changes nothing.
// SQLite has no server to end it (fence.go): a process paused inside a
// transaction holds the write lock until it resumes.
func TestPausedActLosesItsSession(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		q, _ := coreQueue(t, env)
		other := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()))
		mustEnqueue(t, q, testArgs{}, ExpiresIn(time.Millisecond))

		f := takeLease(t, q, "first", 2*time.Second)
		f.idle = time.Second
		fenced, resume := make(chan struct{}), make(chan struct{})
		wake := sync.OnceFunc(func() { close(resume) })
		defer wake() // also when the test fails: the act holds a connection
		done := make(chan error, 1)
		go func() {
			done <- q.leaderAct(ctx, f, func(d dbtx) error {
				close(fenced)
				<-resume // the pause
				_, err := q.st.expire(ctx, d, time.Now().Add(time.Hour), MaintenanceBatch)
				return err
			})
		}()
		waitFor(t, fenced, 10*time.Second, "the act's fence")
		paused := time.Now()
		next := takeLease(t, other, "second", time.Minute) // waits for the lease to pass
		took := time.Since(paused)
		wake()
		if next.term <= f.term {
			t.Fatalf("term %d after the takeover of term %d", next.term, f.term)
		}
		if took > 5*time.Second {
			t.Errorf("the takeover took %v after the pause; the lease was 2 s and the idle bound 1 s", took)
		}
		if err := waitFor(t, done, 10*time.Second, "the resumed act"); err == nil {
			t.Fatalf("the resumed act succeeded after its session should have ended")
		}
		if n := env.countWhere(t, "status = 'expired'"); n != 0 {
			t.Fatalf("%d jobs expired by the resumed act; want 0", n)
		}
	})
}

// TestWorkerStepsDownOnRefusedAct: a worker that leads, by its own clock,
// in a term that moved in the database (the row taken over behind its
// back) has its next act refused, changes nothing, says so and steps
// down. Its lease is long, so that its renewal comes only minutes later:
// the refusal is what ends its leadership.
func TestWorkerStepsDownOnRefusedAct(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		procs := startLeaderProcs(t, env, 1, WorkerConfig{
			MaintenanceInterval: 50 * time.Millisecond, LeaderLease: 30 * time.Minute,
			Periodic: []PeriodicJob{Periodic("tick", cron.MustParse("@every 1s"), kindArgs{K: "tick"}, Type("periodic"))},
		})
		p := theLeader(t, procs, 20*time.Second)
		gained := p.events.next(t, EventLeadershipGained, time.Second)
		// Another process takes the row over (as if the lease had passed
		// in the database while this worker was cut off).
		side := ddl.Side(env.tbl, "leader").Quoted()
		if n := env.exec(t, "UPDATE "+side+" SET holder = 'intruder', term = term + 1 WHERE name = ?", leaderRole); n != 1 {
			t.Fatalf("%d leader rows taken over", n)
		}
		ticksBefore := env.countWhere(t, "name = 'tick'")
		mustEnqueue(t, p.q, testArgs{}, ExpiresIn(time.Millisecond))
		lost := p.events.next(t, EventLeadershipLost, 20*time.Second)
		if lost.Err == nil || !strings.Contains(lost.Err.Error(), "refused") || !strings.Contains(lost.Err.Error(), itoa(int(gained.Leader.Term))) {
			t.Fatalf("lost event %v; want the database's refusal of term %d", lost.Err, gained.Leader.Term)
		}
		// Nothing changed after the takeover: the overdue job is pending,
		// no tick was enqueued in the intruder's term.
		if n := env.countWhere(t, "status = 'expired'"); n != 0 {
			t.Errorf("%d jobs expired after the takeover", n)
		}
		if n := env.countWhere(t, "name = 'tick'"); n != ticksBefore {
			t.Errorf("%d ticks after the takeover, %d before", n, ticksBefore)
		}
		if p.leading() {
			t.Errorf("the worker still leads after the refusal")
		}
	})
}
