package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// startingAt ticks every period from start on, and never before it.
type startingAt struct {
	start  time.Time
	period time.Duration
}

func (s startingAt) Next(t time.Time) time.Time {
	if t.Before(s.start) {
		return s.start
	}
	return everyFrom(s).Next(t)
}

// onceClock is a queue's clock that reads at, except that the call after
// arm reads the time given to arm (the start of the scheduler's term) and
// closes the channel arm returned.
type onceClock struct {
	mu     sync.Mutex
	at     time.Time
	once   time.Time
	called chan struct{}
}

func (c *onceClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.once.IsZero() {
		return c.at
	}
	t := c.once
	c.once = time.Time{}
	close(c.called)
	return t
}

// set makes the clock read t.
func (c *onceClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = t
}

// arm makes the next call read t, and returns a channel closed by it.
func (c *onceClock) arm(t time.Time) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.once, c.called = t, make(chan struct{})
	return c.called
}

// TestPeriodicTickDueAtLapseEnqueuedOnce: a tick that falls due while the
// leader loses its term and the same process takes it again (a lapse) is
// enqueued once, by the new term, with and without RunMissed. The lapse
// is either the database refusing the tick's act because the lease passed
// by the server's clock (a step of that clock, a suspended machine), or
// the leadership running out by the process's own clock while the
// scheduler waited for the tick (renewals that failed), taken again in the
// same term. Before, the new term started from its own now, past the
// tick, and the old term had not enqueued it: without RunMissed the tick
// was enqueued by neither. The clock is the queue's (injected): the old
// term begins just before the tick, the new one at the tick.
func TestPeriodicTickDueAtLapseEnqueuedOnce(t *testing.T) {
	cases := []struct {
		name string
		// before is how long before the tick the old term begins; until
		// the lapse, the clock reads wait before the tick.
		before, wait time.Duration
		// lapse ends the old term once it began (the scheduler read the
		// clock), before the tick's act or during it.
		lapse func(t *testing.T, env *testEnv, e *elector)
		// refused: the old term ends with the database refusing the tick's
		// act (else while waiting for the tick).
		refused bool
	}{
		{"act refused: the lease passed by the server's clock", time.Millisecond, 0, nil, true},
		{"ran out by the process's clock", time.Hour, time.Hour, func(_ *testing.T, _ *testEnv, e *elector) {
			e.lose("test: the renewals failed until the lease ran out by the process's clock")
		}, false},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range cases {
			for _, runMissed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/RunMissed=%v", c.name, runMissed), func(t *testing.T) {
					env := newTestEnv(t, kind)
					tick := time.Now().UTC().Truncate(time.Minute)
					clock := &onceClock{at: tick.Add(-c.wait)}
					q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withClock(clock.now))
					e, _, _ := leadingElector(t, q)
					p := Periodic("lapse", startingAt{start: tick, period: time.Hour}, kindArgs{K: "tick"}, Type("periodic"))
					if c.refused {
						past := "1970-01-01 00:00:01"
						if kind == engine.SQLite {
							past += ".000"
						}
						env.exec(t, "UPDATE "+ddl.Side(env.tbl, "leader").Quoted()+" SET lease_until = '"+past+"' WHERE name = '"+leaderRole+"'")
					}
					started := clock.arm(tick.Add(-c.before))
					s := &scheduler{q: q, log: q.logger, el: e, jobs: []PeriodicJob{p}, runMissed: runMissed}
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan struct{})
					go func() { defer close(done); s.run(ctx) }()
					defer func() { cancel(); <-done }()

					<-started // the old term began before the tick
					if c.lapse != nil {
						c.lapse(t, env, e)
					}
					waitUntil(t, 10*time.Second, "the end of the old term", func() bool { return !e.leads() })
					if n := env.countWhere(t, "name = 'tick'"); n != 0 {
						t.Fatalf("%d jobs of the tick in the old term, want none (its act refused or never sent)", n)
					}
					clock.set(tick)
					e.attempt(ctx) // the same process leads again
					if !e.leads() {
						t.Fatal("the elector did not lead again after the lapse")
					}
					waitUntil(t, 10*time.Second, "the tick's job, enqueued by the new term", func() bool {
						return env.countWhere(t, "name = 'tick'") > 0
					})
					cancel()
					<-done
					if n := env.countWhere(t, "name = 'tick'"); n != 1 {
						t.Fatalf("%d jobs of the periodic job after its tick %v, want 1", n, tick)
					}
				})
			}
		}
	})
}
