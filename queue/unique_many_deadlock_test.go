package queue

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestUniqueManyCrossedKeys: two EnqueueMany calls of two processes take
// the same two keys in opposite orders, each its first key before the
// other takes its second (crossedKeysQueues: the statement hook holds each call's second
// keyed insert until both got there). Each waits for the other's key row:
// a deadlock, which the server ends by failing one transaction. On MySQL
// the queue runs such a transaction again (retryTx); on PostgreSQL the
// call failed with "deadlock detected" and wrote nothing. Now both calls
// succeed on both engines: each key is held by one job, and the call that
// ran again finds both keys taken (duplicates).
func TestUniqueManyCrossedKeys(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		qa, qb := crossedKeysQueues(t, env)
		type result struct {
			n   int
			err error
		}
		results := make(chan result, 2)
		for _, c := range []struct {
			q    *Queue
			keys []string
		}{{qa, []string{"x", "y"}}, {qb, []string{"y", "x"}}} {
			go func() {
				n, err := c.q.EnqueueMany(ctx, []JobArgs{
					WithOptions(testArgs{N: 1}, UniqueKey(c.keys[0])),
					WithOptions(testArgs{N: 2}, UniqueKey(c.keys[1])),
				})
				results <- result{n, err}
			}()
		}
		total := 0
		for range 2 {
			r := waitFor(t, results, 2*dbCallTimeout, "an EnqueueMany to return")
			if r.err != nil {
				t.Errorf("EnqueueMany = %d, %v; want no error", r.n, r.err)
			}
			total += r.n
		}
		if rows := rowCount(t, env); total != 2 || rows != 2 {
			t.Errorf("the calls wrote %d jobs, the table holds %d; want 2 and 2 (one per key)", total, rows)
		}
	})
}

// crossedKeysQueues returns two queues on env, as of two processes, each
// of whose calls holds its second keyed insert (InsertUniqueJob or
// InsertKey) until the other queue's call got to its own: two calls that
// take the same two keys in opposite orders then each hold the key the
// other waits for. A call that runs again passes.
func crossedKeysQueues(t *testing.T, env *testEnv) (*Queue, *Queue) {
	t.Helper()
	var (
		mu      sync.Mutex
		arrived int
		both    = make(chan struct{})
	)
	hook := func() func(string, sqlRunner) {
		calls := 0
		return func(query string, _ sqlRunner) {
			if !strings.Contains(query, "-- name: InsertUniqueJob ") && !strings.Contains(query, "-- name: InsertKey ") {
				return
			}
			mu.Lock()
			calls++
			second := calls == 2
			if second {
				arrived++
				if arrived == 2 {
					close(both)
				}
			}
			mu.Unlock()
			if second {
				<-both
			}
		}
	}
	qa := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(hook()))
	qb := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(hook()))
	return qa, qb
}
