package queue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestPeriodicTickOnceAfterItsJobIsGone: a tick is enqueued once even when
// its job is gone (deleted, pruned, or deleted on success) before a second
// leader reaches the same tick: here leader "a" enqueues the tick, its job
// completes and goes, "a" steps down and "b", whose clock is behind a's
// (or which makes up the latest tick with RunMissed), enqueues the same
// tick. Deleting a job frees its unique key (UniqueFor), so before the
// fix "b" enqueued the tick a second time and its job ran twice. "b"'s
// next tick is enqueued as usual.
func TestPeriodicTickOnceAfterItsJobIsGone(t *testing.T) {
	cases := []struct {
		name string
		// gone makes the tick's completed job id go.
		gone            func(t *testing.T, q *Queue, clock *fixedClock, id int64)
		deleteOnSuccess bool
	}{
		{"deleted", func(t *testing.T, q *Queue, _ *fixedClock, id int64) {
			if err := q.Delete(context.Background(), id); err != nil {
				t.Fatalf("Delete: %v", err)
			}
		}, false},
		{"pruned", func(t *testing.T, q *Queue, clock *fixedClock, _ int64) {
			clock.add(time.Second)
			if n, err := q.Prune(context.Background(), 0); err != nil || n != 1 {
				t.Fatalf("Prune = %d, %v; want the tick's job pruned", n, err)
			}
		}, false},
		{"deleted on success", nil, true},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				env := coreEnv(t, kind)
				var opts []Option
				if c.deleteOnSuccess {
					opts = append(opts, WithDeleteOnSuccess(true))
				}
				q, clock := coreQueue(t, env, opts...)
				tick := clock.now().Truncate(time.Minute)
				const period = time.Minute
				p := Periodic("report", everyFrom{start: tick.Add(-10 * period), period: period}, kindArgs{K: "report"}, Type("periodic"))
				enqueueAs := func(f *termFence, tick time.Time) (int64, bool) {
					t.Helper()
					var id int64
					var dup bool
					err := q.leaderAct(ctx, f, func(d dbtx) error {
						var err error
						id, dup, err = q.enqueueTickOnce(ctx, d, p, tick, tick, time.Time{}) // the server's clock at the tick
						return err
					})
					if err != nil {
						t.Fatalf("enqueue of tick %v: %v", tick, err)
					}
					return id, dup
				}

				fa := takeLease(t, q, "a", time.Minute)
				id, dup := enqueueAs(fa, tick)
				if dup || id == 0 {
					t.Fatalf("a's enqueue of the tick: id %d, dup %v; want a new job", id, dup)
				}
				completeJob(t, q, "periodic")
				if c.gone != nil {
					c.gone(t, q, clock, id)
				}
				if n := env.countWhere(t, "1=1"); n != 0 {
					t.Fatalf("%d jobs left, want the tick's job gone", n)
				}
				if err := q.st.leaderRelease(ctx, leaderRole, "a"); err != nil {
					t.Fatal(err)
				}

				fb := takeLease(t, q, "b", time.Minute)
				if again, dup := enqueueAs(fb, tick); !dup || env.countWhere(t, "1=1") != 0 {
					t.Fatalf("b's enqueue of the same tick: id %d, dup %v, %d jobs; want a duplicate and no job", again, dup, env.countWhere(t, "1=1"))
				}
				if next, dup := enqueueAs(fb, tick.Add(period)); dup || next == 0 {
					t.Fatalf("b's enqueue of the next tick: id %d, dup %v; want a new job", next, dup)
				}
				if n := env.countWhere(t, "1=1"); n != 1 {
					t.Fatalf("%d jobs after the next tick, want 1", n)
				}
			})
		}
	})
}

// TestPeriodicRunMissedAfterRestartOnceJobDeleted: a worker with
// RunMissed whose queue deletes completed jobs (WithDeleteOnSuccess)
// enqueues the latest tick when it starts leading, its job runs and is
// deleted; started again (a deploy, a crash), the worker makes up the
// latest tick again only if it was not enqueued: here it was, so the
// handler does not run a second time. Before, the deleted job had freed
// the tick's key and every restart ran the latest tick once more.
func TestPeriodicRunMissedAfterRestartOnceJobDeleted(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		logs := &testdb.LogRecorder{}
		q := env.queue(t, nil, WithLogger(slog.New(logs)), WithDeleteOnSuccess(true))
		sched := everyFrom{start: time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute), period: 1000 * time.Hour}
		p := Periodic("restart", sched, kindArgs{K: "tick"}, Type("periodic"))
		var runs atomic.Int32
		start := func() (stop func(time.Duration) error) {
			cfg := fastConfig()
			cfg.Types, cfg.MaintenanceInterval, cfg.RunMissed, cfg.Periodic = []string{"periodic"}, -1, true, []PeriodicJob{p}
			w := q.NewWorker(cfg)
			w.HandleDefault(func(context.Context, *JobRow) error { runs.Add(1); return nil })
			stop, _ = startWorker(t, w)
			return stop
		}
		stop := start()
		waitUntil(t, 30*time.Second, "the latest tick run and its job deleted", func() bool {
			return runs.Load() == 1 && env.countWhere(t, "1=1") == 0
		})
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		const already = "periodic tick already enqueued"
		stop = start()
		waitUntil(t, 30*time.Second, "the restarted worker's look at the latest tick", func() bool {
			return logs.Count(slog.LevelInfo, already) > 0 || runs.Load() > 1
		})
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the latest tick ran %d times across the restart, want once", n)
		}
	})
}

// TestPeriodicSchedulerBehindClockTickOnce: a leader whose clock is behind
// the last leader's reaches, on its own clock, a tick that the last leader
// enqueued and whose job is gone, and does not enqueue it again; its next
// tick is enqueued as usual. Unlike TestPeriodicTickOnceAfterItsJobIsGone
// this goes through the scheduler (a worker with RunMissed), whose ticks
// follow the queue's clock: b's test clock, set behind a's, drives which
// ticks are due. Before, the scheduler read the wall clock, ignoring the
// queue's: its RunMissed tick and its due ticks were the wall clock's, not
// those of b's clock, and the first wait below timed out.
func TestPeriodicSchedulerBehindClockTickOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		qa, clockA := coreQueue(t, env, WithDeleteOnSuccess(true))
		const period = 2 * time.Second // b waits for its next tick in real time: keep it short
		tick := clockA.now().Truncate(period)
		p := Periodic("report", everyFrom{start: tick.Add(-10 * period), period: period}, kindArgs{K: "report"}, Type("periodic"))

		// Leader a enqueues the tick; its job runs and is deleted.
		fa := takeLease(t, qa, "a", time.Minute)
		if err := qa.leaderAct(ctx, fa, func(d dbtx) error {
			id, dup, err := qa.enqueueTickOnce(ctx, d, p, tick, tick, time.Time{}) // the server's clock at the tick
			if err == nil && (dup || id == 0) {
				err = fmt.Errorf("id %d, dup %v; want a new job", id, dup)
			}
			return err
		}); err != nil {
			t.Fatalf("a's enqueue of tick %v: %v", tick, err)
		}
		completeJob(t, qa, "periodic")
		if n := env.countWhere(t, "1=1"); n != 0 {
			t.Fatalf("%d jobs left, want the tick's job deleted", n)
		}
		if err := qa.st.leaderRelease(ctx, leaderRole, "a"); err != nil {
			t.Fatal(err)
		}

		// Leader b's clock is a second before the tick.
		logs := &testdb.LogRecorder{}
		clockB := newFixedClock()
		clockB.add(tick.Add(-time.Second).Sub(clockB.now()))
		qb := env.queue(t, nil, withClock(clockB.now), WithLogger(slog.New(logs)))
		cfg := fastConfig()
		cfg.Types, cfg.MaintenanceInterval, cfg.RunMissed, cfg.Periodic = []string{"periodic"}, -1, true, []PeriodicJob{p}
		w := qb.NewWorker(cfg)
		w.HandleDefault(func(context.Context, *JobRow) error { return nil })
		stop, _ := startWorker(t, w)
		logged := func(msg string, tick time.Time) bool {
			want := fmt.Sprintf("tick=%v", slog.TimeValue(tick))
			for _, l := range logs.Lines(slog.LevelInfo) {
				if strings.HasPrefix(l, msg) && strings.Contains(l, want) {
					return true
				}
			}
			return false
		}
		const already = "periodic tick already enqueued (no later than the last tick recorded)"
		// RunMissed: the latest tick on b's clock is the one before.
		waitUntil(t, 30*time.Second, "b's look at the tick before, the latest on its clock", func() bool { return logged(already, tick.Add(-period)) })
		clockB.add(time.Second)
		waitUntil(t, 30*time.Second, "b's look at the tick that a enqueued", func() bool { return logged(already, tick) })
		if n := env.countWhere(t, "1=1"); n != 0 {
			t.Fatalf("%d jobs after b reached the tick a enqueued, want none (enqueued once)\nlogs:\n%s", n, strings.Join(logs.Lines(slog.LevelInfo), "\n"))
		}
		clockB.add(period)
		waitUntil(t, 30*time.Second, "b's enqueue of the next tick", func() bool { return logged("periodic job enqueued", tick.Add(period)) })
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if n := logs.Count(slog.LevelInfo, "periodic job enqueued"); n != 1 {
			t.Fatalf("b enqueued %d ticks, want 1 (the next one)\nlogs:\n%s", n, strings.Join(logs.Lines(slog.LevelInfo), "\n"))
		}
	})
}
