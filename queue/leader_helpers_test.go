package queue

// Helpers of the leadership tests (leader_test.go): workers of one table
// on pools of their own, as if in processes of their own, and the leader
// among them.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// leaderProc is one worker of a leadership test, on its own pool as if in
// its own process, with its own listener and statement count.
type leaderProc struct {
	q      *Queue
	w      *Worker
	events *eventLog
	stop   func(time.Duration) error

	mu      sync.Mutex
	expires int // ExpireOverdue statements it sent
}

func (p *leaderProc) observe(query string, _ sqlRunner) {
	if strings.Contains(query, "'expired', finished_at") {
		p.mu.Lock()
		p.expires++
		p.mu.Unlock()
	}
}

func (p *leaderProc) expireStatements() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expires
}

// leading is whether the process's last leadership event was a gain.
func (p *leaderProc) leading() bool {
	p.events.mu.Lock()
	defer p.events.mu.Unlock()
	for i := len(p.events.events) - 1; i >= 0; i-- {
		switch p.events.events[i].Kind {
		case EventLeadershipGained:
			return true
		case EventLeadershipLost:
			return false
		}
	}
	return false
}

// startLeaderProcs starts n workers of env's table that claim nothing
// (type "none") and take part in the leadership with cfg.
func startLeaderProcs(t *testing.T, env *testEnv, n int, cfg WorkerConfig) []*leaderProc {
	t.Helper()
	procs := make([]*leaderProc, n)
	for i := range procs {
		p := &leaderProc{events: newEventLog()}
		p.q = env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()), WithListener(p.events.listen), withStatementHook(p.observe))
		c := cfg
		c.Types = []string{"none"}
		p.w = p.q.NewWorker(c)
		p.stop, _ = startWorker(t, p.w)
		procs[i] = p
	}
	return procs
}

// theLeader waits until exactly one of procs leads and returns it.
func theLeader(t *testing.T, procs []*leaderProc, timeout time.Duration) *leaderProc {
	t.Helper()
	var leader *leaderProc
	waitUntil(t, timeout, "one worker to lead", func() bool {
		leader = nil
		for _, p := range procs {
			if p.leading() {
				if leader != nil {
					t.Fatalf("two workers lead at once")
				}
				leader = p
			}
		}
		return leader != nil
	})
	return leader
}

// leadingElector returns an elector of q (a lease of 5 s) that leads: its
// first attempt took the free lease. It returns the elector's fence and the
// context of its term as fence gives them.
func leadingElector(t *testing.T, q *Queue) (*elector, *termFence, context.Context) {
	t.Helper()
	e := newElector(q, q.logger, 5*time.Second, false)
	ctx := context.Background()
	if !e.ensure(ctx) {
		t.Fatal("creating the leader row failed")
	}
	e.attempt(ctx)
	f, term, leading := e.fence()
	if !leading {
		t.Fatal("the elector does not lead after its first attempt")
	}
	return e, f, term
}
