package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestElectorLearnsTheTermOfARenewalAfterALapse: when a leader's lease
// passed by the database server's clock while the leader, by its own
// monotonic clock, still led (the server's clock stepped forward, or the
// machine was suspended: Go's monotonic clock stands still meanwhile), its
// next renewal takes the lease again in a new term. The elector kept the
// old term, so the database refused the leader's next act: a periodic
// tick then due was skipped, although this worker led when it passed.
// After a renewal, the elector leads in the term the database holds.
func TestElectorLearnsTheTermOfARenewalAfterALapse(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		ctx := context.Background()
		e := newElector(q, q.logger, 5*time.Second, false)
		if !e.ensure(ctx) {
			t.Fatal("ensure failed")
		}
		e.attempt(ctx)
		f, _, ok := e.fence()
		if !ok {
			t.Fatal("the first attempt did not take the free lease")
		}
		first := f.term
		// The lease passes by the server's clock, not by the process's.
		past := "1970-01-01 00:00:01"
		if kind == engine.SQLite {
			past += ".000"
		}
		leaderTable := `"` + env.table + `_leader"`
		if kind == engine.MySQL {
			leaderTable = "`" + env.table + "_leader`"
		}
		env.exec(t, fmt.Sprintf(`UPDATE %s SET lease_until = '%s'`, leaderTable, past))
		e.attempt(ctx)
		f, _, ok = e.fence()
		if !ok {
			t.Fatal("the renewal after the lapse left the worker without the lead")
		}
		r, err := q.st.leaderGet(ctx, leaderRole)
		if err != nil {
			t.Fatal(err)
		}
		if r.holder != e.holder || r.term == first {
			t.Fatalf("the renewal after the lapse: holder %q term %d (first term %d)", r.holder, r.term, first)
		}
		if f.term != r.term {
			t.Fatalf("the elector leads in term %d, the database holds term %d for it", f.term, r.term)
		}
		err = q.leaderAct(ctx, f, func(dbtx) error { return nil })
		if err != nil {
			t.Fatalf("the leader's next act: %v", err)
		}
	})
}
