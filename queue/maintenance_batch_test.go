package queue

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// batchLog records the rows each batch of ExpireOverdue and Prune changed
// (withBatchHook).
type batchLog struct {
	mu    sync.Mutex
	sizes map[string][]int64
}

func (b *batchLog) hear(op string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sizes == nil {
		b.sizes = map[string][]int64{}
	}
	b.sizes[op] = append(b.sizes[op], n)
}

func (b *batchLog) of(op string) []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int64(nil), b.sizes[op]...)
}

// TestMaintenanceBoundedBatches: ExpireOverdue and Prune handle a backlog of
// 100 000 rows in many statements, none of which changes more than
// MaintenanceBatch rows, each on its own (never one transaction around them):
// Prune as the manual command runs it (each statement its own transaction),
// ExpireOverdue as the leader's maintenance does (each statement the one
// write of its own fenced act, leaderAct).
func TestMaintenanceBoundedBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("enqueues 100 000 jobs per engine")
	}
	const total = 100_000
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		var batches batchLog
		var mu sync.Mutex
		stmtsIn := map[string]int{} // "expire"/"prune" → statements sent
		inTx := 0                   // of those, sent inside a transaction
		txs := map[*sql.Tx]int{}    // statements of each transaction
		hook := func(query string, tx *sql.Tx) {
			op := ""
			switch {
			case strings.Contains(query, "'expired', finished_at"):
				op = "expire"
			case strings.Contains(query, "DELETE FROM") && strings.Contains(query, "finished_at <"):
				op = "prune"
			default:
				return
			}
			mu.Lock()
			defer mu.Unlock()
			stmtsIn[op]++
			if tx != nil {
				txs[tx]++
			}
			if tx != nil && kind != engine.MySQL {
				inTx++ // MySQL runs each one in its own READ COMMITTED transaction
			}
		}
		q, clock := coreQueue(t, env, withBatchHook(0, batches.hear), withStatementHook(hook))

		args := make([]JobArgs, total)
		for i := range args {
			args[i] = testArgs{N: i}
		}
		if _, err := q.EnqueueMany(ctx, args, ExpiresIn(time.Second)); err != nil {
			t.Fatal(err)
		}
		clock.add(2 * time.Second)

		for _, tc := range []struct {
			op  string
			run func() (int64, error)
			// after is the condition on the rows once op is done.
			after string
		}{
			{"expire", func() (int64, error) {
				return q.expireOverdue(ctx, takeLease(t, q, "leader", 10*time.Minute))
			}, "status = 'expired'"},
			{"prune", func() (int64, error) {
				clock.add(48 * time.Hour)
				return q.Prune(ctx, 24*time.Hour)
			}, "1 = 1"},
		} {
			t.Run(tc.op, func(t *testing.T) {
				n, err := tc.run()
				if err != nil || n != total {
					t.Fatalf("%s = %d, %v; want %d", tc.op, n, err, total)
				}
				sizes := batches.of(tc.op)
				var sum int64
				for i, s := range sizes {
					if s > MaintenanceBatch {
						t.Fatalf("%s: statement %d changed %d rows, more than the batch of %d", tc.op, i, s, MaintenanceBatch)
					}
					sum += s
				}
				if sum != total || len(sizes) < total/MaintenanceBatch {
					t.Fatalf("%s: %d statements changed %d rows; want at least %d statements changing %d", tc.op, len(sizes), sum, total/MaintenanceBatch, total)
				}
				mu.Lock()
				sent, tx, acts := stmtsIn[tc.op], inTx, len(txs)
				for x := range txs {
					if txs[x] != 1 {
						acts = -1
					}
				}
				clear(txs)
				inTx = 0
				mu.Unlock()
				if sent != len(sizes) {
					t.Errorf("%s: %d statements sent, %d batches heard", tc.op, sent, len(sizes))
				}
				switch {
				case tc.op == "expire" && acts != sent:
					t.Errorf("expire as leader: %d statements in %d transactions (-1: one held several); want each in its own act", sent, acts)
				case tc.op == "prune" && tx != 0:
					t.Errorf("%d maintenance statements ran inside a transaction; each must be its own", tx)
				}
				if tc.op == "expire" {
					if left := env.countWhere(t, tc.after); left != total {
						t.Fatalf("%d rows expired, want %d", left, total)
					}
				} else if left := env.countWhere(t, tc.after); left != 0 {
					t.Fatalf("%d rows left after Prune, want 0", left)
				}
			})
		}
	})
}
