package queue

import (
	"context"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestUniqueManyTxCrossedKeys: two EnqueueManyResultsTx calls, each in its
// caller's transaction, take the same two keys in opposite orders, each its
// first key before the other takes its second (crossedKeysQueues): a deadlock, which
// the server ends by failing one of them. The queue cannot run a caller's
// transaction again; the victim's error is one the caller can tell to run
// it again (retryableTx), and says what is left of its transaction. On
// MySQL the server rolled the whole transaction back, savepoint included:
// the error said that "the jobs written before it could not be taken back
// (roll your transaction back)" because the savepoint was gone, when
// nothing of them was left. On PostgreSQL the savepoint takes the call
// back and the caller's transaction stays usable. The other call takes
// both keys.
func TestUniqueManyTxCrossedKeys(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		qa, qb := crossedKeysQueues(t, env)
		type result struct {
			res    []EnqueueResult
			err    error
			usable error // a statement in the transaction after the call
			commit error
		}
		results := make(chan result, 2)
		for _, c := range []struct {
			q    *Queue
			keys []string
		}{{qa, []string{"x", "y"}}, {qb, []string{"y", "x"}}} {
			go func() {
				tx, err := env.db.BeginTx(ctx, nil)
				if err != nil {
					results <- result{err: err}
					return
				}
				var r result
				r.res, r.err = c.q.EnqueueManyResultsTx(ctx, tx, []JobArgs{
					WithOptions(testArgs{N: 1}, UniqueKey(c.keys[0])),
					WithOptions(testArgs{N: 2}, UniqueKey(c.keys[1])),
				})
				if r.err != nil {
					var n int
					r.usable = tx.QueryRowContext(ctx, "SELECT 1").Scan(&n)
					r.commit = tx.Rollback()
				} else {
					r.commit = tx.Commit()
				}
				results <- r
			}()
		}
		var failed, wrote []result
		for range 2 {
			r := waitFor(t, results, 2*dbCallTimeout, "an EnqueueManyResultsTx to return")
			if r.err != nil {
				failed = append(failed, r)
			} else {
				wrote = append(wrote, r)
			}
		}
		if len(failed) != 1 || len(wrote) != 1 {
			t.Fatalf("%d calls failed, %d wrote; want one each (a deadlock): %+v %+v", len(failed), len(wrote), failed, wrote)
		}
		if w := wrote[0]; w.commit != nil || len(w.res) != 2 || w.res[0].Duplicate || w.res[1].Duplicate {
			t.Errorf("the call that went through: %+v; want both keys written and committed", w)
		}
		f := failed[0]
		if !retryableTx(f.err) {
			t.Errorf("the victim's error %v is not one to run the transaction again for", f.err)
		}
		if msg := f.err.Error(); strings.Contains(msg, "could not be taken back") {
			t.Errorf("the victim's error says its jobs could not be taken back: %v", f.err)
		}
		switch kind {
		case engine.MySQL:
			if !strings.Contains(f.err.Error(), "rolled your whole transaction back") {
				t.Errorf("the victim's error %q does not say that the server rolled its transaction back", f.err)
			}
		case engine.Postgres:
			if f.usable != nil {
				t.Errorf("the victim's transaction is not usable after the call: %v", f.usable)
			}
		}
		if f.commit != nil {
			t.Errorf("rolling the victim's transaction back: %v", f.commit)
		}
		if rows := rowCount(t, env); rows != 2 {
			t.Errorf("the table holds %d jobs; want 2 (one per key)", rows)
		}
	})
}
