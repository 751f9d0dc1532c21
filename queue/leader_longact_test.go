package queue

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestLongActKeepsLeadership: a leader whose act lasts longer than its
// lease keeps the leadership. Its act here is a periodic tick's enqueue,
// held up by another process's transaction that holds the tick's unique
// key for more than a lease (3 s) after the act passed its fence. The
// leader's renewals go on meanwhile (its lease is renewed a lease and more
// after the act was held up): it never loses the leadership, its term
// stays, and once the other transaction lets the key go the act enqueues
// the tick, once. Before the renewal wrote another row than the one the
// acts lock, it waited for the act: the leadership ran out by the
// process's clock at about 0.8 of a lease, and was taken again, the pass
// run again, once the act had given up.
//
// Not on SQLite: it has one writer, so an act (a write transaction) keeps
// every other write waiting, the renewal included, and a transaction of
// the test keeps the act from starting at all (fence.go).
func TestLongActKeepsLeadership(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		// A short lease, but not the shortest: MySQL's leader leads for
		// the lease less a fifth and a second after each renewal (0.6 s of
		// a 2 s lease, renewed every 0.4 s), too tight on a loaded machine.
		const lease = 3 * time.Second
		sched := everyFrom{start: time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute), period: 1000 * time.Hour}
		p := Periodic("held", sched, kindArgs{K: "held"}, Type("periodic"))

		// Another process takes the tick's unique key in a transaction it
		// keeps open.
		other := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()))
		tx, err := other.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup, err := other.enqueueTick(ctx, tx, p, latestTick(sched, time.Now())); err != nil || dup {
			t.Fatalf("the other process's enqueue of the tick: %v, duplicate %v", err, dup)
		}
		letGo := sync.OnceFunc(func() {
			if err := tx.Rollback(); err != nil {
				t.Errorf("ending the transaction that holds the tick's key: %v", err)
			}
		})
		defer letGo() // also when the test fails: the act waits for it

		events := newEventLog()
		fences := make(chan struct{}, 1)
		hook := func(query string, _ sqlRunner) {
			if strings.Contains(query, "-- name: FenceLeaderAct ") {
				select {
				case fences <- struct{}{}:
				default:
				}
			}
		}
		q := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()), WithListener(events.listen), withStatementHook(hook))
		w := q.NewWorker(WorkerConfig{
			Types: []string{"none"}, MaintenanceInterval: -1, LeaderLease: lease,
			RunMissed: true, Periodic: []PeriodicJob{p},
		})
		stop, _ := startWorker(t, w)
		gained := events.next(t, EventLeadershipGained, 20*time.Second)
		waitFor(t, fences, 10*time.Second, "the tick's act")
		held, err := q.Leader(ctx)
		if err != nil || held == nil {
			t.Fatalf("Leader when the act was held up: %+v, %v", held, err)
		}

		lost := func() error {
			events.mu.Lock()
			defer events.mu.Unlock()
			for _, ev := range events.events {
				if ev.Kind == EventLeadershipLost {
					return ev.Err
				}
			}
			return nil
		}
		waitUntil(t, 30*time.Second, "a renewal more than a lease after the act was held up", func() bool {
			if err := lost(); err != nil {
				t.Fatalf("the leader lost the leadership while its act was held up: %v", err)
			}
			ld, err := q.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return ld.RenewedAt.Sub(held.RenewedAt) > lease+lease/2
		})
		if n := env.countWhere(t, "name = 'held'"); n != 0 {
			t.Fatalf("%d jobs of the tick while the other process held its key; want 0", n)
		}

		letGo()
		waitUntil(t, 20*time.Second, "the held act to enqueue the tick", func() bool {
			return env.countWhere(t, "name = 'held'") == 1
		})
		ld, err := q.Leader(ctx)
		if err != nil || ld == nil || !ld.Active || ld.Holder != gained.Leader.Holder || ld.Term != gained.Leader.Term {
			t.Fatalf("Leader after the long act = %+v, %v; want %s active in term %d still", ld, err, gained.Leader.Holder, gained.Leader.Term)
		}
		if err := stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		var kinds []EventKind
		events.mu.Lock()
		for _, ev := range events.events {
			if ev.Kind == EventLeadershipGained || ev.Kind == EventLeadershipLost {
				kinds = append(kinds, ev.Kind)
			}
		}
		events.mu.Unlock()
		if len(kinds) != 2 || kinds[0] != EventLeadershipGained || kinds[1] != EventLeadershipLost {
			t.Errorf("leadership events %v; want one gain, and the loss at the stop", kinds)
		}
		if n := env.countWhere(t, "name = 'held'"); n != 1 {
			t.Errorf("%d jobs of the tick; want 1", n)
		}
	})
}
