package queue

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestPeriodicTickAheadOfServerClock: the leader's clock decides which
// ticks are due, and the last tick recorded for a periodic job refuses
// every tick at or before it, for whichever worker leads next. A leader
// whose clock was an hour ahead recorded a tick an hour ahead, and the
// ticks of the next hour, by a corrected clock or another leader's, were
// taken as enqueued already (logged at Info): an hour without the job.
// Now a tick more than maxTickAhead ahead of the database server's clock
// is neither enqueued nor recorded (an error that says to fix the clock),
// and a record that far ahead (written by an older version) refuses no
// tick: the tick is enqueued, with a warning, and replaces it. A clock
// ahead by less than maxTickAhead is a skew the rule lets be.
//
// Leader "a" is the leader with its clock ahead (its queue's injected
// clock), "b" the same leader's term through a queue whose clock is right.
func TestPeriodicTickAheadOfServerClock(t *testing.T) {
	cases := []struct {
		name string
		// ahead is how far a's clock is ahead; zero: a enqueues nothing
		// and the record is planted an hour ahead, as an older version's.
		ahead time.Duration
		// fromA, fromB: the jobs each enqueues of its tick.
		fromA, fromB int
		// logged is a line the case logs at warning level or above.
		logged string
	}{
		{name: "a an hour ahead", ahead: time.Hour, fromA: 0, fromB: 1, logged: "ahead of the database server's clock"},
		{name: "a 30s ahead, within the skew", ahead: 30 * time.Second, fromA: 1, fromB: 0},
		{name: "record an hour ahead", fromB: 1, logged: "the last tick recorded for a periodic job is ahead of the database server's clock"},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				env := newTestEnv(t, kind)
				logs := &testdb.LogRecorder{}
				start := time.Now().UTC()
				clockA := &fixedClock{t: start.Add(c.ahead)}
				clockB := &fixedClock{t: start}
				qa := env.queue(t, nil, WithLogger(slog.New(logs)), withClock(clockA.now))
				qb := env.queue(t, nil, WithLogger(slog.New(logs)), withClock(clockB.now))
				e, f, term := leadingElector(t, qa)
				sched := everyFrom{start: start.Truncate(time.Hour), period: time.Minute}
				pa := Periodic("report", sched, kindArgs{K: "from_a"}, Type("periodic"))
				pb := Periodic("report", sched, kindArgs{K: "from_b"}, Type("periodic"))

				if c.ahead > 0 {
					sa := &scheduler{q: qa, log: qa.logger, el: e, jobs: []PeriodicJob{pa}}
					if !sa.enqueue(term, f, pa, latestTick(sched, clockA.now())) {
						t.Fatal("a's enqueue reported its term ended")
					}
				} else {
					planted := start.Add(time.Hour).Truncate(time.Minute)
					if err := qa.leaderAct(ctx, f, func(d dbtx) error {
						return qa.st.periodicSetLastTick(ctx, d, tickRow(pa.name), pa.name, tickRecord{tick: planted.UnixNano()})
					}); err != nil {
						t.Fatalf("planting the record: %v", err)
					}
				}
				sb := &scheduler{q: qb, log: qb.logger, el: e, jobs: []PeriodicJob{pb}}
				tickB := latestTick(sched, clockB.now())
				if !sb.enqueue(term, f, pb, tickB) {
					t.Fatal("b's enqueue reported its term ended")
				}
				if n := env.countWhere(t, "name = 'from_a'"); n != c.fromA {
					t.Errorf("%d jobs of a's tick, want %d", n, c.fromA)
				}
				if n := env.countWhere(t, "name = 'from_b'"); n != c.fromB {
					t.Errorf("%d jobs of b's tick %v, want %d; logs: %q", n, tickB, c.fromB, logs.Lines(slog.LevelInfo))
				}
				if c.logged != "" && !logged(logs, slog.LevelWarn, c.logged) {
					t.Errorf("no warning or error saying %q: %q", c.logged, logs.Lines(slog.LevelWarn))
				}
				if c.fromB == 1 {
					// b's tick is the record now: enqueued again, it is a
					// duplicate.
					if !sb.enqueue(term, f, pb, tickB) {
						t.Fatal("b's second enqueue reported its term ended")
					}
					if n := env.countWhere(t, "name = 'from_b'"); n != 1 {
						t.Errorf("%d jobs of b's tick after its second enqueue, want 1", n)
					}
				}
			})
		}
	})
}

// logged reports whether logs hold a record at level or above whose
// message or attributes contain part.
func logged(logs *testdb.LogRecorder, level slog.Level, part string) bool {
	for _, l := range logs.Lines(level) {
		if strings.Contains(l, part) {
			return true
		}
	}
	return false
}
