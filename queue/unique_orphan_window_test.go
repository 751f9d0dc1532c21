package queue

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestPruneKeysBoundedWindow: with many live keys and a few orphans (key
// rows whose job is gone) at the end of the job_id range, each pass of
// Prune examines at most one window of key rows (the maintenance batch),
// so it finds the orphans only at the pass whose window reaches them, and
// repeated passes find every orphan; live keys are never deleted. Before,
// each pass read the whole key table to find the orphans, however few.
func TestPruneKeysBoundedWindow(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		const window, live, orphans = 10, 47, 3
		var sc stmtCounter
		q, _ := coreQueue(t, env, withBatchHook(window, nil), withStatementHook(sc.observe))
		ids := make([]int64, live+orphans)
		for i := range ids {
			ids[i] = newKeyed(t, q, fmt.Sprintf("k%d", i))
		}
		gone := ids[live:]
		for _, id := range gone {
			if n := env.exec(t, "DELETE FROM {t} WHERE id = ?", id); n != 1 {
				t.Fatalf("deleting job %d deleted %d rows", id, n)
			}
		}
		side := ddl.Side(env.tbl, "unique")
		countKeys := func(cond string) int {
			t.Helper()
			var n int
			query := "SELECT COUNT(*) FROM " + side.Quoted() + " u WHERE " + cond
			if err := env.db.QueryRowContext(ctx, query).Scan(&n); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			return n
		}
		orphanCond := "NOT EXISTS (SELECT 1 FROM " + env.tbl.Quoted() + " j WHERE j.id = u.job_id)"

		// The windows of 10 key rows in job_id order: passes 1 to 4 see
		// live keys only; pass 5 sees the last 10 keys, the orphans among
		// them.
		passes := (live+orphans+window-1)/window + 1
		for pass := 1; pass <= passes; pass++ {
			sc.reset()
			if _, err := q.Prune(ctx, 0); err != nil {
				t.Fatalf("pass %d: Prune: %v", pass, err)
			}
			left := countKeys(orphanCond)
			want := orphans
			if pass*window >= live+orphans {
				want = 0
			}
			if left != want {
				t.Fatalf("after pass %d (window %d of %d keys), %d orphan keys left, want %d", pass, window, live+orphans, left, want)
			}
			// The pass's statements on the key table: a window and the
			// deletion of its orphans, after an empty window when the
			// cursor stood at the end of the key table.
			var onKeys []string
			sc.mu.Lock()
			for _, s := range sc.texts {
				if strings.Contains(s, "_unique") {
					onKeys = append(onKeys, s)
				}
			}
			sc.mu.Unlock()
			if len(onKeys) > 3 {
				t.Errorf("pass %d sent %d statements on the key table, want at most 3: %q", pass, len(onKeys), onKeys)
			}
		}
		if n := countKeys("1 = 1"); n != live {
			t.Fatalf("%d key rows left, want the %d live ones", n, live)
		}
		// Live keys still hold: enqueuing one is a duplicate of its job.
		if id, dup := enqueueKey(t, q, "k0"); !dup || id != ids[0] {
			t.Fatalf("enqueue of live key k0 = %d, duplicate %v; want a duplicate of %d", id, dup, ids[0])
		}
		// An orphan's key is free again.
		if _, dup := enqueueKey(t, q, fmt.Sprintf("k%d", live)); dup {
			t.Fatalf("enqueue of the freed key k%d is a duplicate", live)
		}
	})
}
