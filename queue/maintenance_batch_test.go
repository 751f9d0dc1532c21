package queue

import (
	"context"
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

// TestMaintenanceBoundedBatches: Reclaim, ExpireOverdue and Prune handle a
// backlog of 100 000 rows in many bounded steps: Reclaim in rounds of at
// most 500 jobs, ExpireOverdue and Prune in statements of at most
// MaintenanceBatch rows, each on its own (never one transaction around
// them): Prune as the manual command runs it (each statement its own
// transaction), Reclaim and ExpireOverdue as the leader's maintenance does
// (each round, each statement, its own fenced act, leaderAct).
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
		txs := map[sqlRunner]int{}  // statements of each transaction
		hook := func(query string, tx sqlRunner) {
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
		if _, err := q.EnqueueMany(ctx, args, ExpiresIn(time.Hour)); err != nil {
			t.Fatal(err)
		}
		leader := takeLease(t, q, "leader", 10*time.Minute)

		for _, tc := range []struct {
			op  string
			run func() (int64, error)
			// after is the condition on the rows once op is done.
			after string
		}{
			{"reclaim", func() (int64, error) {
				// Every job claimed, and its lease run out: abandoned.
				for claimed := 0; claimed < total; {
					jobs := mustClaim(t, q, nil, maxClaim, time.Minute)
					if len(jobs) == 0 {
						t.Fatalf("claimed %d of %d jobs, then none", claimed, total)
					}
					claimed += len(jobs)
				}
				clock.add(2 * time.Minute)
				return q.reclaim(ctx, leader)
			}, "status = 'pending' AND attempts = 1"},
			{"expire", func() (int64, error) {
				clock.add(2 * time.Hour)
				return q.expireOverdue(ctx, leader)
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
				batch := int64(MaintenanceBatch)
				if tc.op == "reclaim" {
					batch = reclaimBatch // a round: one read of at most 500 and their writes
				}
				var sum int64
				for i, s := range sizes {
					if s > batch {
						t.Fatalf("%s: batch %d changed %d rows, more than the batch of %d", tc.op, i, s, batch)
					}
					sum += s
				}
				if sum != total || len(sizes) < total/int(batch) {
					t.Fatalf("%s: %d batches changed %d rows; want at least %d batches changing %d", tc.op, len(sizes), sum, total/int(batch), total)
				}
				if tc.op == "reclaim" {
					if left := env.countWhere(t, tc.after); left != total {
						t.Fatalf("%d rows reclaimed to pending, want %d", left, total)
					}
					return // its statements are checked by TestReclaimInBatches
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
