package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
)

// TestPausedRenewalBlocksNoTakeover: a leader paused in the middle of its
// renewal (its lease row written, its fence row not yet read: SIGSTOP, a
// VM's pause) holds no lock, so another worker takes the role over once
// the lease has passed. Before, the renewal's statements ran in one
// transaction and the paused process held the role's row locked: every
// takeover waited for it until it resumed (CI saw "no process leads" for
// 36 s on MariaDB after a SIGSTOP of the leader).
func TestPausedRenewalBlocksNoTakeover(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		var pause atomic.Bool
		paused, release := make(chan struct{}), make(chan struct{})
		pausedOnce, releaseOnce := sync.OnceFunc(func() { close(paused) }), sync.OnceFunc(func() { close(release) })
		defer releaseOnce() // also when the test fails: the renewal holds a goroutine
		q := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()), withStatementHook(func(query string, _ sqlRunner) {
			if pause.Load() && strings.Contains(query, "name: LeaderFenceBehind") {
				pausedOnce()
				<-release
			}
		}))
		other := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()))

		first := takeLease(t, q, "first", 2*time.Second)
		pause.Store(true)
		renewed := make(chan error, 1)
		go func() {
			_, err := q.st.leaderAcquire(ctx, leaderRole, "first", 2*time.Second)
			renewed <- err
		}()
		waitFor(t, paused, 10*time.Second, "the renewal to pause between its statements")
		waitUntil(t, 10*time.Second, "the lease to pass by the server's clock", func() bool {
			ld, err := other.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return !ld.Active
		})
		// Each try bounded: before, a try waited for the paused renewal's
		// lock (and leaderEnsure, which takeLease runs first, for ever).
		var last error
		testwait.Until(t, 10*time.Second, 20*time.Millisecond, func() bool {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			ok, err := other.st.leaderAcquire(cctx, leaderRole, "second", time.Minute)
			last = err
			return ok && err == nil
		}, func() string {
			return fmt.Sprintf("no takeover within 10 s while the first's renewal is paused (last error: %v)", last)
		})
		second, err := other.st.leaderGet(ctx, leaderRole)
		if err != nil {
			t.Fatal(err)
		}
		if second == nil || second.holder != "second" || second.term <= first.term {
			t.Errorf("leader row %+v after the takeover of term %d, want second's, a later term", second, first.term)
		}
		releaseOnce()
		if err := waitFor(t, renewed, 10*time.Second, "the paused renewal"); err != nil {
			t.Errorf("the paused renewal, resumed: %v", err)
		}
		ld, err := other.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ld.Holder != "second" || !ld.Active {
			t.Errorf("leader %+v after the resumed renewal, want second, active", ld)
		}
	})
}
