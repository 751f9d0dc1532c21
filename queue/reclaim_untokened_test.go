package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestReclaimUntokenedAttempts: an in_progress job whose lease passed is
// an abandoned attempt (SPEC section 3) also when its claim_token is NULL
// (written by hand or by another client of the table): Reclaim ends it
// like any other. Before, the statements matched only the tokens read
// ("claim_token IN (…)", never true for NULL): such jobs stayed in_progress
// for good, and 500 of them, read first by every round, kept Reclaim from
// reaching the abandoned attempts behind them.
func TestReclaimUntokenedAttempts(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, untokened := range []int{2, reclaimBatch} {
			t.Run(fmt.Sprint(untokened, " untokened"), func(t *testing.T) {
				ctx := context.Background()
				env := coreEnv(t, kind)
				q, clock := coreQueue(t, env)
				args := make([]JobArgs, untokened+1)
				for i := range args {
					args[i] = testArgs{N: i}
				}
				if _, err := q.EnqueueMany(ctx, args); err != nil {
					t.Fatal(err)
				}
				// One attempt claimed as usual, whose lease passes last.
				mustClaim(t, q, nil, 1, time.Minute)
				// The others' leases passed before it (when they were
				// enqueued), so that each round reads them first.
				env.exec(t, "UPDATE {t} SET status = 'in_progress', attempts = 1, claim_token = NULL, lease_until = created_at WHERE status = 'pending'")
				clock.add(2 * time.Minute)
				n, err := q.Reclaim(ctx)
				if err != nil {
					t.Fatalf("Reclaim: %v", err)
				}
				if n != int64(untokened+1) {
					t.Errorf("Reclaim ended %d attempts, want %d (%d untokened, 1 claimed)", n, untokened+1, untokened)
				}
				if left := env.countWhere(t, "status = 'in_progress'"); left != 0 {
					t.Errorf("%d jobs still in_progress after Reclaim", left)
				}
				if pending := env.countWhere(t, "status = 'pending' AND claim_token IS NULL AND lease_until IS NULL"); pending != untokened+1 {
					t.Errorf("%d jobs pending again with no token and lease, want %d", pending, untokened+1)
				}
			})
		}
	})
}
