package queue

import (
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// poolStatements records the statements a queue sends on the pool, each
// on its own, outside any transaction or held connection.
type poolStatements struct {
	mu    sync.Mutex
	texts []string
}

func (p *poolStatements) observe(q string, on sqlRunner) {
	if on != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.texts = append(p.texts, q)
}

func (p *poolStatements) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	texts := p.texts
	p.texts = nil
	return texts
}

// TestPeriodicTickReadsServerClockInItsAct: a tick's enqueue is one act
// of the leader, and the database server's clock that bounds the tick
// (tickAhead) comes from the act's own fence statement. Before, every
// tick first read the leadership's row on the pool for the server's
// clock (GetLeader), one round trip more per tick. Counted by statements:
// once the unique keys' side table was checked (the first tick), a tick
// sends nothing on the pool, and no statement reads the leadership's row
// as GetLeader does.
func TestPeriodicTickReadsServerClockInItsAct(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		pool := &poolStatements{}
		all := &stmtCounter{}
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(func(query string, on sqlRunner) {
			pool.observe(query, on)
			all.observe(query, on)
		}))
		e, f, term := leadingElector(t, q)
		start := time.Now().UTC().Truncate(time.Minute)
		sched := everyFrom{start: start.Add(-time.Hour), period: time.Minute}
		p := Periodic("count", sched, kindArgs{K: "tick"})
		s := &scheduler{q: q, log: q.logger, el: e, jobs: []PeriodicJob{p}}
		if !s.enqueue(term, f, p, start.Add(-time.Minute)) {
			t.Fatal("the first tick's enqueue reported its term ended")
		}
		pool.take()
		all.reset()
		if !s.enqueue(term, f, p, start) {
			t.Fatal("the second tick's enqueue reported its term ended")
		}
		if n := env.countWhere(t, "name = 'tick'"); n != 2 {
			t.Fatalf("%d jobs of the two ticks, want 2", n)
		}
		if texts := pool.take(); len(texts) != 0 {
			t.Errorf("a tick sent %d statements on the pool, outside its act, want none: %q", len(texts), texts)
		}
		if n := all.countWith("name: GetLeader "); n != 0 {
			t.Errorf("a tick read the leadership's row %d times (GetLeader), want 0 (of %d statements)", n, all.count())
		}
		t.Logf("%s: %d statements for one tick", kind, all.count())
	})
}
