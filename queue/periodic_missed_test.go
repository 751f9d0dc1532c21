package queue

import (
	"log/slog"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestRunMissedAfterScheduleChange: with RunMissed, a new leader (a
// restart, a deploy) makes up the latest tick of its schedule only when a
// tick was missed while no leader ran. A leader of the old schedule
// enqueued the tick at :15 (every 15 minutes); a leader of a new schedule
// (every 10 minutes, the same periodic job) starts at :22. The new
// schedule's tick at :20 passed while the old leader ran, which had no
// tick then: it is not a missed tick, and before, it was enqueued at once,
// a job more than either schedule gives. The last leader records the next
// tick its schedule gives with the last tick enqueued, and a tick is
// made up only when that next tick has come (here the old schedule's :30,
// in the case that starts at :42). An unchanged schedule behaves as
// before: its latest tick is made up when it is not the last one
// enqueued.
func TestRunMissedAfterScheduleChange(t *testing.T) {
	cases := []struct {
		name    string
		period  time.Duration // the new leader's schedule (the old one's: 15 minutes)
		startAt time.Duration // when the new leader starts, after the hour
		jobs    int           // jobs of the periodic job after its RunMissed tick
	}{
		{name: "changed, no tick of the old schedule missed", period: 10 * time.Minute, startAt: 22 * time.Minute, jobs: 1},
		{name: "changed, the old schedule's tick at :30 missed", period: 10 * time.Minute, startAt: 42 * time.Minute, jobs: 2},
		{name: "unchanged, no tick missed", period: 15 * time.Minute, startAt: 22 * time.Minute, jobs: 1},
		{name: "unchanged, the tick at :30 missed", period: 15 * time.Minute, startAt: 37 * time.Minute, jobs: 2},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				env := newTestEnv(t, kind)
				logs := &testdb.LogRecorder{}
				// Two hours in the past, by the server's clock too: no tick
				// is ahead of it (tickAhead).
				hour := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
				clock := &fixedClock{t: hour.Add(c.startAt)}
				q := env.queue(t, nil, WithLogger(slog.New(logs)), withClock(clock.now))
				e, f, term := leadingElector(t, q)

				old := Periodic("report", everyFrom{start: hour, period: 15 * time.Minute}, kindArgs{K: "report"})
				before := &scheduler{q: q, log: q.logger, el: e, jobs: []PeriodicJob{old}}
				if !before.enqueue(term, f, old, hour.Add(15*time.Minute)) {
					t.Fatal("the old leader's enqueue reported its term ended")
				}

				sched := everyFrom{start: hour, period: c.period}
				p := Periodic("report", sched, kindArgs{K: "report"})
				s := &scheduler{q: q, log: q.logger, el: e, jobs: []PeriodicJob{p}, runMissed: true}
				if !s.resume(term, f, clock.now()) {
					t.Fatal("resume reported the term ended")
				}
				if n := env.countWhere(t, "name = 'report'"); n != c.jobs {
					t.Errorf("%d jobs of the periodic job, want %d; logs: %q", n, c.jobs, logs.Lines(slog.LevelInfo))
				}
				if got, want := s.due[0], sched.Next(clock.now()); !got.Equal(want) {
					t.Errorf("next tick due %v, want %v", got, want)
				}
			})
		}
	})
}
