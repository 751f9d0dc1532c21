package queue

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue/cron"
)

// TestLeadership: of three workers of one table, one leads; Queue.Leader
// names it; only it runs the maintenance; when it stops, it gives the
// lease up and another leads at once; never two at a time.
func TestLeadership(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		if ld, err := env.queue(t, nil, WithLogger(testdb.QuietLogger())).Leader(ctx); err != nil || ld != nil {
			t.Fatalf("Leader before any worker ran = %+v, %v; want nil, nil", ld, err)
		}
		procs := startLeaderProcs(t, env, 3, WorkerConfig{MaintenanceInterval: 200 * time.Millisecond})
		first := theLeader(t, procs, 20*time.Second)
		gained := first.events.next(t, EventLeadershipGained, time.Second)
		if gained.Leader == nil || gained.Leader.Holder == "" || gained.Leader.Term < 1 {
			t.Fatalf("gained event %+v", gained.Leader)
		}
		ld, err := first.q.Leader(ctx)
		if err != nil || ld == nil || ld.Holder != gained.Leader.Holder || !ld.Active || ld.Term != gained.Leader.Term || ld.Since.IsZero() || !ld.LeaseUntil.After(ld.Since) {
			t.Fatalf("Leader = %+v, %v; want %s active in term %d", ld, err, gained.Leader.Holder, gained.Leader.Term)
		}

		// Only the leader maintains the table: wait for a few of its passes.
		waitUntil(t, 20*time.Second, "three maintenance passes", func() bool { return first.expireStatements() >= 3 })
		for _, p := range procs {
			if p != first && (p.expireStatements() != 0 || p.leading()) {
				t.Fatalf("a worker that does not lead ran %d maintenance statements", p.expireStatements())
			}
		}

		// The leader stops: it gives the lease up, and another takes over
		// well before the lease would have passed.
		if err := first.stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		lost := first.events.next(t, EventLeadershipLost, time.Second)
		if !errors.Is(lost.Err, errLeadershipEnded) {
			t.Fatalf("lost event's Err %v", lost.Err)
		}
		// Its lease ended when its Run returned, not LeaderLease later:
		// the row shows it inactive, or another holder took it already.
		// (The wait for the next leader below cannot tell: it is longer
		// than the lease.)
		ld, err = first.q.Leader(ctx)
		if err != nil || ld == nil || (ld.Holder == gained.Leader.Holder && ld.Active) {
			t.Fatalf("Leader right after the leader stopped = %+v, %v; want its lease ended", ld, err)
		}
		var others []*leaderProc
		for _, p := range procs {
			if p != first {
				others = append(others, p)
			}
		}
		// Another tries every LeaderLease/5 (1 s): it leads before the
		// lease of 5 s that a crashed leader would leave behind passes.
		second := theLeader(t, others, 10*time.Second)
		next := second.events.next(t, EventLeadershipGained, time.Second)
		if next.Leader.Holder == gained.Leader.Holder || next.Leader.Term <= gained.Leader.Term {
			t.Fatalf("new leader %+v after %+v; want another holder in a later term", next.Leader, gained.Leader)
		}
		ld, err = second.q.Leader(ctx)
		if err != nil || ld == nil || ld.Holder != next.Leader.Holder || !ld.Active {
			t.Fatalf("Leader = %+v, %v; want %s", ld, err, next.Leader.Holder)
		}
		before := second.expireStatements()
		waitUntil(t, 20*time.Second, "the new leader's maintenance", func() bool { return second.expireStatements() > before })
	})
}

// TestLeaderTableMissing: a table installed before the leader table
// existed keeps working for enqueues and claims, but a worker that would
// take part in the leadership, and Queue.Leader, fail saying to run Install.
func TestLeaderTableMissing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		env.exec(t, ddl.DropTable(ddl.Side(env.tbl, "leader")))
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		id := mustEnqueue(t, q, testArgs{})
		if got := mustClaim(t, q, nil, 1, time.Minute); len(got) != 1 || got[0].ID != id {
			t.Fatalf("claim on a table without the leader table: %v", got)
		}
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ErrSideTableMissing) || !strings.Contains(err.Error(), "Install") || !strings.Contains(err.Error(), env.tbl.Name+"_leader") {
				t.Errorf("%s: %v; want ErrSideTableMissing naming %s_leader and Install", what, err, env.tbl.Name)
			}
		}
		_, err := q.Leader(ctx)
		check("Leader", err)
		w := q.NewWorker(WorkerConfig{Types: []string{"none"}})
		check("Run", w.Run(ctx))
		// A worker that takes no part in the leadership runs as before.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		w = q.NewWorker(WorkerConfig{Types: []string{"none"}, MaintenanceInterval: -1})
		if err := w.Run(cctx); err != nil {
			t.Errorf("Run without maintenance or periodic jobs: %v", err)
		}
	})
}

// TestRunEnsuresLeaderRowOnce: a Run checks the leader table with a read
// (GetLeader) and its elector creates the leadership's row only when that
// read found none, once, before its first attempt to lead: on a new table
// the first Run writes the row, a second Run of the worker, with the row
// there, does not.
func TestRunEnsuresLeaderRowOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		sent := newStatementNames("GetLeader", "EnsureLeaderRow", "AcquireLeader")
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(sent.hook))
		w := q.NewWorker(WorkerConfig{Types: []string{"none"}})
		for _, c := range []struct {
			run  string
			want []string
		}{
			{"first Run (no row yet)", []string{"GetLeader", "EnsureLeaderRow", "AcquireLeader"}},
			{"second Run (the row there)", []string{"GetLeader", "AcquireLeader"}},
		} {
			run := c.run
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			var got []string
			waitUntil(t, 10*time.Second, "the elector's first attempt", func() bool {
				got = append(got, sent.take()...)
				return slices.Contains(got, "AcquireLeader")
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("%s: Run = %v", run, err)
			}
			first := got[:slices.Index(got, "AcquireLeader")+1]
			if !slices.Equal(first, c.want) {
				t.Errorf("%s sent %v before leading; want %v", run, first, c.want)
			}
			sent.take()
		}
	})
}

// TestPeriodicOncePerTick: two workers with the same periodic job of
// @every 1s: its jobs have one tick each, none twice, one a second while
// the leader runs; a job of @hourly enqueues nothing meanwhile (its last
// tick passed before anyone led, and RunMissed is off).
func TestPeriodicOncePerTick(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		cfg := WorkerConfig{
			MaintenanceInterval: -1,
			Periodic: []PeriodicJob{
				Periodic("tick", cron.MustParse("@every 1s"), kindArgs{K: "tick"}, Type("periodic")),
				Periodic("hourly", cron.MustParse("@hourly"), kindArgs{K: "hourly"}, Type("periodic")),
			},
		}
		startLeaderProcs(t, env, 2, cfg)
		waitUntil(t, 30*time.Second, "five ticks", func() bool { return env.countWhere(t, "name = 'tick'") >= 5 })
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		rows, err := q.List(context.Background(), ListFilter{Type: "periodic", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[time.Time]bool{}
		var ats []time.Time
		for _, r := range rows {
			if r.Name != "tick" {
				t.Fatalf("job %s enqueued; the hourly tick before anyone led must not be made up", r.Name)
			}
			at := r.ScheduledAt
			if at.Truncate(time.Second) != at {
				t.Errorf("tick at %v: not a whole second", at)
			}
			if seen[at] {
				t.Fatalf("tick %v enqueued twice", at)
			}
			seen[at] = true
			ats = append(ats, at)
		}
		missing, first, last := testdb.MissingSeconds(ats)
		for _, at := range missing {
			t.Errorf("tick %v missing between %v and %v while one worker led", at, first, last)
		}
	})
}

// TestRunMissed: with RunMissed, a worker that gains the leadership
// enqueues the latest tick that passed while none led (once, whichever
// worker gains it).
func TestRunMissed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		cfg := WorkerConfig{
			MaintenanceInterval: -1, RunMissed: true,
			Periodic: []PeriodicJob{Periodic("hourly", cron.MustParse("@hourly"), kindArgs{K: "hourly"}, Type("periodic"))},
		}
		procs := startLeaderProcs(t, env, 2, cfg)
		theLeader(t, procs, 20*time.Second)
		waitUntil(t, 10*time.Second, "the missed hourly tick", func() bool { return env.countWhere(t, "name = 'hourly'") == 1 })
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		rows, err := q.List(context.Background(), ListFilter{Type: "periodic"})
		if err != nil || len(rows) != 1 {
			t.Fatalf("List = %v, %v", rows, err)
		}
		if at := rows[0].ScheduledAt; at.Truncate(time.Hour) != at || time.Since(at) > time.Hour+time.Minute {
			t.Fatalf("the missed tick is at %v; want the last whole hour", at)
		}
	})
}

// TestPeriodicBadInput: invalid periodic jobs and two with one name are
// refused when registered, adding nothing, and by Run.
func TestPeriodicBadInput(t *testing.T) {
	env := newTestEnv(t, engine.SQLite)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	every := cron.MustParse("@every 1s")
	cases := []struct {
		name string
		jobs []PeriodicJob
		want string
	}{
		{"empty name", []PeriodicJob{Periodic("", every, testArgs{})}, "name is empty"},
		{"long name", []PeriodicJob{Periodic(strings.Repeat("n", 201), every, testArgs{})}, "at most 200"},
		{"nil schedule", []PeriodicJob{Periodic("a", nil, testArgs{})}, "schedule is nil"},
		{"nil args", []PeriodicJob{Periodic("a", every, nil)}, "args are nil"},
		{"args that do not encode", []PeriodicJob{Periodic("a", every, badArgs{})}, "payload"},
		{"bad type", []PeriodicJob{Periodic("a", every, testArgs{}, Type(strings.Repeat("t", 65)))}, "type"},
		{"no tick", []PeriodicJob{Periodic("a", neverSchedule{}, testArgs{})}, "no tick"},
		{"two with one name", []PeriodicJob{Periodic("a", every, testArgs{}), Periodic("a", every, testArgs{})}, `two periodic jobs are named "a"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := q.NewWorker(WorkerConfig{Types: []string{"none"}})
			if err := w.AddPeriodic(Periodic("ok", every, testArgs{})); err != nil {
				t.Fatal(err)
			}
			err := w.AddPeriodic(c.jobs...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("AddPeriodic = %v; want an error saying %q", err, c.want)
			}
			if len(w.cfg.Periodic) != 1 {
				t.Fatalf("%d periodic jobs registered after a refused AddPeriodic; want the 1 from before", len(w.cfg.Periodic))
			}
			w = q.NewWorker(WorkerConfig{Types: []string{"none"}, Periodic: c.jobs})
			if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %v; want an error saying %q", err, c.want)
			}
		})
	}
	for _, lease := range []time.Duration{time.Second, time.Hour} {
		w := q.NewWorker(WorkerConfig{Types: []string{"none"}, LeaderLease: lease})
		if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "LeaderLease") {
			t.Errorf("Run with LeaderLease %v = %v; want an error naming LeaderLease", lease, err)
		}
	}
}

// neverSchedule has no tick.
type neverSchedule struct{}

func (neverSchedule) Next(time.Time) time.Time { return time.Time{} }

// TestLatestTick: the latest tick at or before now, also far back (a
// schedule whose ticks come years apart) and after a long run of ticks
// (every minute of a half year). Before, it gave none for ticks more than
// about two years apart (@every 9000h, 29 February), and for a run of more
// than 100 000 ticks an early one of them instead of the last.
func TestLatestTick(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 30, 15, 0, time.UTC)
	december := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		spec string
		now  time.Time
		want time.Time
	}{
		{"@every 1s", now, now},
		{"@every 1m", now, time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC)},
		{"@hourly", now, time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)},
		{"@monthly", now, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"0 0 1 6 *", now, time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)},
		{"0 0 29 2 *", now, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)},
		{"@every 9000h", now, time.Unix(1767263415/(9000*3600)*(9000*3600), 0).UTC()},
		{"* * * 1-6 *", december, time.Date(2026, 6, 30, 23, 59, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Paris 30 2 * * *", time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC), time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			if got := latestTick(cron.MustParse(c.spec), c.now); !got.Equal(c.want) {
				t.Errorf("latestTick(%v) = %v, want %v", c.now, got, c.want)
			}
		})
	}
	if got := latestTick(neverSchedule{}, now); !got.IsZero() {
		t.Errorf("latestTick of a schedule with no tick = %v", got)
	}
}

// TestTickEnqueuedOnce: a second enqueue of a periodic job's tick (a new
// leader, a retry) is a duplicate that returns the first job, also after
// that job completed; another tick is a new job.
func TestTickEnqueuedOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		p := Periodic("report", cron.MustParse("@every 1m"), kindArgs{K: "report"}, Type("periodic"))
		tick := time.Now().UTC().Truncate(time.Minute)
		id, dup, err := q.enqueueTick(ctx, nil, p, tick)
		if err != nil || dup {
			t.Fatalf("first enqueue of the tick = %d, %v, %v", id, dup, err)
		}
		if row := getJob(t, q, id); !row.ScheduledAt.Equal(tick) || row.Name != "report" || row.Type != "periodic" {
			t.Fatalf("the tick's job %+v; want kind report, type periodic, scheduled at %v", row, tick)
		}
		again, dup, err := q.enqueueTick(ctx, nil, p, tick)
		if err != nil || !dup || again != id {
			t.Fatalf("second enqueue of the tick = %d, %v, %v; want a duplicate of %d", again, dup, err, id)
		}
		jobs := mustClaim(t, q, []string{"periodic"}, 1, time.Minute)
		if _, err := q.complete(ctx, []attemptRef{jobs[0].ref()}); err != nil {
			t.Fatal(err)
		}
		again, dup, err = q.enqueueTick(ctx, nil, p, tick)
		if err != nil || !dup || again != id {
			t.Fatalf("enqueue of the tick after its job completed = %d, %v, %v; want a duplicate of %d", again, dup, err, id)
		}
		next, dup, err := q.enqueueTick(ctx, nil, p, tick.Add(time.Minute))
		if err != nil || dup || next == id {
			t.Fatalf("enqueue of the next tick = %d, %v, %v; want a new job", next, dup, err)
		}
		if n := env.countWhere(t, "name = 'report'"); n != 2 {
			t.Fatalf("%d jobs for two ticks", n)
		}
	})
}

// TestFence: under a closed fence no statement is sent (the statement
// hook hears none) and the call fails with the fence's error; under an
// open one the calls work.
func TestFence(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		var mu sync.Mutex
		sent := 0
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(func(string, sqlRunner) {
			mu.Lock()
			sent++
			mu.Unlock()
		}))
		closed := withFence(context.Background(), func() error { return errNotLeading })
		calls := []struct {
			name string
			call func(ctx context.Context) error
		}{
			{"ExpireOverdue", func(ctx context.Context) error { _, err := q.ExpireOverdue(ctx); return err }},
			{"Reclaim", func(ctx context.Context) error { _, err := q.Reclaim(ctx); return err }},
			{"Prune", func(ctx context.Context) error { _, err := q.Prune(ctx, time.Hour); return err }},
			{"Enqueue", func(ctx context.Context) error { _, err := q.Enqueue(ctx, testArgs{}); return err }},
			{"keyed Enqueue", func(ctx context.Context) error {
				_, err := q.Enqueue(ctx, testArgs{}, UniqueKey("k"))
				return err
			}},
			{"Get", func(ctx context.Context) error { _, err := q.Get(ctx, 1); return err }},
		}
		for _, c := range calls {
			t.Run(c.name, func(t *testing.T) {
				mu.Lock()
				sent = 0
				mu.Unlock()
				if err := c.call(closed); !errors.Is(err, errNotLeading) {
					t.Errorf("under a closed fence: %v; want errNotLeading", err)
				}
				mu.Lock()
				n := sent
				mu.Unlock()
				if n != 0 {
					t.Errorf("%d statements sent under a closed fence", n)
				}
				open := withFence(context.Background(), func() error { return nil })
				if err := c.call(open); err != nil && !errors.Is(err, ErrJobNotFound) {
					t.Errorf("under an open fence: %v", err)
				}
			})
		}
		if n := env.countWhere(t, "1 = 1"); n != 2 {
			t.Errorf("%d jobs; want the 2 enqueued under the open fence", n)
		}
	})
}

// conflictingStore is a store whose leaderAcquire loses its first
// conflicts tries to another transaction (MySQL's deadlock error, as Galera
// reports a certification conflict) before it runs.
type conflictingStore struct {
	store
	conflicts int
	tries     int
}

func (s *conflictingStore) leaderAcquire(ctx context.Context, role, holder string, lease time.Duration) (bool, error) {
	s.tries++
	if s.tries <= s.conflicts {
		return false, &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	}
	return s.store.leaderAcquire(ctx, role, holder, lease)
}

// TestElectorRetriesConflicts: a renewal that loses to another transaction
// (a deadlock, a Galera certification conflict) is sent again at once and
// the worker leads without a warning; only one that keeps losing, past
// retryTx's tries, is a failed attempt, logged once as a warning.
func TestElectorRetriesConflicts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		conflicts int
		leads     bool
		warnings  int
	}{
		{"no conflict", 0, true, 0},
		{"one conflict", 1, true, 0},
		{"four conflicts", 4, true, 0},
		{"conflicts past the retries", 5, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, engine.SQLite)
			logs := &testdb.LogRecorder{}
			q := env.queue(t, nil, WithLogger(slog.New(logs)))
			st := &conflictingStore{store: q.st, conflicts: c.conflicts}
			q.st = st
			e := newElector(q, q.logger, 5*time.Second, false)
			ctx := context.Background()
			if !e.ensure(ctx) {
				t.Fatalf("ensure failed: %q", logs.Lines(slog.LevelWarn))
			}
			e.attempt(ctx)
			if e.leads() != c.leads {
				t.Errorf("after an attempt whose first %d tries conflicted: leads %v, want %v", c.conflicts, e.leads(), c.leads)
			}
			if l := logs.Lines(slog.LevelWarn); len(l) != c.warnings {
				t.Errorf("%d warnings, want %d: %q", len(l), c.warnings, l)
			}
			if want := min(c.conflicts+1, 5); st.tries != want {
				t.Errorf("leaderAcquire tried %d times, want %d", st.tries, want)
			}
		})
	}
}

// TestAttemptTimeout: an attempt of a leader may take as long as its
// leadership has left; one of a process that does not lead, or whose
// leadership is about to end, the renewal interval (at least a second).
func TestAttemptTimeout(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		every time.Duration
		until time.Time
		want  time.Duration
	}{
		{"not leading", time.Second, time.Time{}, time.Second},
		{"leading, 4 s left", time.Second, now.Add(4 * time.Second), 4 * time.Second},
		{"leading, less left than every", 2 * time.Second, now.Add(500 * time.Millisecond), 2 * time.Second},
		{"leading, lease already past", time.Second, now.Add(-time.Second), time.Second},
		{"short lease", 200 * time.Millisecond, time.Time{}, time.Second},
	} {
		if got := attemptTimeout(c.every, c.until, now); got != c.want {
			t.Errorf("%s: attemptTimeout = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestElectorRenewalTimeout: a leader's renewal is sent with the time its
// leadership has left, not cut off after the renewal interval.
func TestElectorRenewalTimeout(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.SQLite)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	st := &deadlineStore{store: q.st}
	q.st = st
	e := newElector(q, q.logger, 5*time.Second, false)
	ctx := context.Background()
	if !e.ensure(ctx) {
		t.Fatal("ensure failed")
	}
	e.attempt(ctx) // takes the lease
	if !e.leads() {
		t.Fatal("the first attempt did not take the free lease")
	}
	if left := time.Until(st.last); left > e.every+100*time.Millisecond {
		t.Errorf("taking the lease could take %v, want at most the interval %v", left, e.every)
	}
	// The renewal may take until the leadership's local end (about 5 s
	// from now), not e.every (1 s) from its start: its deadline is not
	// before that end, however long the test took to get here (read after
	// the renewal, the time left could have been short on a busy machine).
	e.mu.Lock()
	until := e.until
	e.mu.Unlock()
	if left := time.Until(until); left <= e.every {
		t.Logf("only %v of leadership left before the renewal; its deadline cannot tell", left)
	}
	e.attempt(ctx) // renews it
	if st.last.Before(until) {
		t.Errorf("a renewal with %v of leadership left could take until %v, %v before the leadership's end; want until its end",
			time.Until(until), st.last, until.Sub(st.last))
	}
}

// deadlineStore records the deadline of each leaderAcquire's context.
type deadlineStore struct {
	store
	last time.Time
}

func (s *deadlineStore) leaderAcquire(ctx context.Context, role, holder string, lease time.Duration) (bool, error) {
	s.last, _ = ctx.Deadline()
	return s.store.leaderAcquire(ctx, role, holder, lease)
}

// everyFrom is a Schedule with a tick every period from start (and before
// it, back in time): its latest tick is fixed for the whole test, unlike a
// wall clock's hour, which may turn while the test runs.
type everyFrom struct {
	start  time.Time
	period time.Duration
}

func (s everyFrom) Next(t time.Time) time.Time {
	n := t.Sub(s.start) / s.period
	next := s.start.Add(n * s.period)
	for !next.After(t) {
		next = next.Add(s.period)
	}
	for next.Add(-s.period).After(t) {
		next = next.Add(-s.period)
	}
	return next
}

// TestPeriodicTickOutcomes: what the leader does with a tick the database
// does not take as a new job (scheduler.enqueue). The tick here is the
// latest one, which a new leader enqueues at once with RunMissed.
//   - already enqueued (by an earlier leader): logged at Info, no second job;
//   - the leader's term ended in the database while its process still led
//     (here: the term moved on just before the tick's fence): nothing
//     enqueued in that term, a Warn, and the worker steps down; it leads
//     again in a new term and enqueues the tick then;
//   - refused by the server (PostgreSQL: a number beyond numeric): an Error
//     that says the tick is skipped, after one try, not the tries again
//     that a failing database gets.
//
// The term-ended case runs where another connection can write while the
// act's transaction is open (not SQLite, where the act holds the
// database's write lock).
func TestPeriodicTickOutcomes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		sched := everyFrom{start: time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute), period: 1000 * time.Hour}
		cases := []struct {
			name    string
			engines []engine.Kind
			args    JobArgs
			before  func(t *testing.T, env *testEnv, q *Queue, p PeriodicJob) // before the worker starts
			endTerm bool                                                      // move the term on before the first tick's fence
			once    bool                                                      // the tick is tried in one fenced act, not retried
			wait    string                                                    // the log line the case waits for
			level   slog.Level
			jobs    int // jobs of the tick at the end
		}{
			{
				name: "already enqueued", engines: []engine.Kind{engine.Postgres, engine.MySQL, engine.SQLite},
				args: kindArgs{K: "tick"},
				before: func(t *testing.T, env *testEnv, q *Queue, p PeriodicJob) {
					if _, dup, err := q.enqueueTick(ctx, nil, p, latestTick(sched, time.Now())); err != nil || dup {
						t.Fatalf("enqueue of the tick before the worker: %v, duplicate %v", err, dup)
					}
				},
				wait: "periodic tick already enqueued", level: slog.LevelInfo, jobs: 1,
			},
			{
				name: "term ended", engines: []engine.Kind{engine.Postgres, engine.MySQL},
				args: kindArgs{K: "tick"}, endTerm: true,
				wait: "this worker's term has ended there", level: slog.LevelWarn, jobs: 1,
			},
			{
				name: "refused by the server", engines: []engine.Kind{engine.Postgres},
				args: RawArgs{Name: "tick", Payload: json.RawMessage(`[1e1000000]`)},
				wait: "the tick is skipped", level: slog.LevelError, jobs: 0, once: true,
			},
		}
		for _, c := range cases {
			if !slices.Contains(c.engines, kind) {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				env := newTestEnv(t, kind)
				p := Periodic("outcome", sched, c.args, Type("periodic"))
				logs := &testdb.LogRecorder{}
				var mu sync.Mutex
				fences := 0
				leader := ddl.Side(env.tbl, "leader").Quoted()
				hook := func(query string, tx sqlRunner) {
					mu.Lock()
					defer mu.Unlock()
					if !strings.Contains(query, "-- name: FenceLeaderAct ") {
						return
					}
					fences++
					if c.endTerm && fences == 1 {
						// Another process took the row over and gave it
						// back: the term moved on under this leader.
						env.exec(t, "UPDATE "+leader+" SET term = term + 1")
					}
				}
				q := env.queue(t, nil, WithLogger(slog.New(logs)), withStatementHook(hook))
				if c.before != nil {
					c.before(t, env, q, p)
				}
				w := q.NewWorker(WorkerConfig{Types: []string{"none"}, MaintenanceInterval: -1, RunMissed: true, Periodic: []PeriodicJob{p}})
				stop, _ := startWorker(t, w)
				waitUntil(t, 20*time.Second, c.wait, func() bool { return logs.Count(c.level, c.wait) > 0 })
				if c.endTerm {
					waitUntil(t, 20*time.Second, "the tick in the next term", func() bool { return env.countWhere(t, "name = 'tick'") == 1 })
				}
				if err := stop(10 * time.Second); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if n := env.countWhere(t, "name = 'tick'"); n != c.jobs {
					t.Errorf("%d jobs of the tick, want %d", n, c.jobs)
				}
				if n := logs.Count(c.level, c.wait); n != 1 {
					t.Errorf("%d log lines %q, want 1: %q", n, c.wait, logs.Lines(slog.LevelInfo))
				}
				mu.Lock()
				defer mu.Unlock()
				if c.once && fences != 1 {
					t.Errorf("the refused tick was tried %d times (fenced acts), want once", fences)
				}
				if c.endTerm && fences < 2 {
					t.Errorf("%d fenced acts, want the refused one and the next term's", fences)
				}
			})
		}
	})
}

// TestAddPeriodicWhileRunning: AddPeriodic registers jobs "for the next
// Run", so it may be called while the worker runs; Run read the
// configuration without the worker's lock, a data race (go test -race,
// which CI runs on this package, fails here without the lock).
func TestAddPeriodicWhileRunning(t *testing.T) {
	env := newTestEnv(t, engine.SQLite)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	cfg := fastConfig()
	cfg.MaintenanceInterval = -1
	w := q.NewWorker(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }() // nothing orders its start and the call below
	err := w.AddPeriodic(Periodic("p", cron.MustParse("@every 1h"), emailArgs{}))
	cancel()
	if runErr := <-ran; err != nil || runErr != nil {
		t.Fatalf("AddPeriodic: %v; Run: %v", err, runErr)
	}
}
