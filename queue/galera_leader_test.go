package queue

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue/cron"
)

// TestGaleraLeadershipAcrossNodes: three workers, each on another node of
// a MariaDB Galera cluster (SPEC sections 9 and 12), elect one leader
// among them, never two at once; only it runs the maintenance, and its
// @every 1s periodic job gets one job per tick. When it stops, a worker on
// another node takes over at once (the stopped one released its lease)
// and the ticks go on. Every node holds the same ticks, none twice. Each
// idle worker says once that only its own node's enqueues wake it (user
// locks are per node); it said nothing, and was woken by nothing enqueued
// on the other nodes.
// TestGalera drains jobs across the nodes and TestGaleraFenceAcrossNodes
// fences one act; neither elected a leader among nodes nor enqueued a
// periodic job there.
func TestGaleraLeadershipAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbs, table := galeraTable(t)
	cfg := WorkerConfig{
		Types: []string{"none"}, MaintenanceInterval: 200 * time.Millisecond,
		Periodic: []PeriodicJob{Periodic("tick", cron.MustParse("@every 1s"), kindArgs{K: "tick"}, Type("periodic"))},
	}
	procs := make([]*leaderProc, len(dbs))
	logs := make([]*testdb.LogRecorder, len(dbs))
	for i, db := range dbs {
		p := &leaderProc{events: newEventLog()}
		logs[i] = &testdb.LogRecorder{}
		q, err := New(db, WithTable(table), WithLogger(slog.New(logs[i])), WithListener(p.events.listen), withStatementHook(p.observe))
		if err != nil {
			t.Fatalf("queue.New on node %d: %v", i+1, err)
		}
		t.Cleanup(func() {
			if err := q.Close(); err != nil {
				t.Errorf("node %d: closing the queue: %v", i+1, err)
			}
		})
		p.q, p.w = q, q.NewWorker(cfg)
		p.stop, _ = startWorker(t, p.w)
		procs[i] = p
	}
	// ticks reads the ticks' times on node i, failing on a tick with two
	// jobs.
	ticks := func(i int) map[time.Time]bool {
		rows, err := procs[i].q.List(ctx, ListFilter{Type: "periodic", Limit: 1000})
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		seen := map[time.Time]bool{}
		for _, r := range rows {
			if seen[r.ScheduledAt] {
				t.Fatalf("node %d: tick %v enqueued twice", i+1, r.ScheduledAt)
			}
			seen[r.ScheduledAt] = true
		}
		return seen
	}
	after := func(i int, since time.Time) int {
		n := 0
		for at := range ticks(i) {
			if at.After(since) {
				n++
			}
		}
		return n
	}

	first := theLeader(t, procs, time.Minute)
	waitUntil(t, time.Minute, "three ticks under the first leader", func() bool { return after(0, time.Time{}) >= 3 })
	for i, p := range procs {
		if p != first && p.expireStatements() != 0 {
			t.Errorf("node %d, which does not lead, ran %d maintenance statements", i+1, p.expireStatements())
		}
	}

	if err := first.stop(30 * time.Second); err != nil {
		t.Fatalf("the first leader's Run: %v", err)
	}
	var rest []*leaderProc
	for _, p := range procs {
		if p != first {
			rest = append(rest, p)
		}
	}
	stopped := time.Now()
	second := theLeader(t, rest, time.Minute)
	t.Logf("a worker on another node led %v after the leader stopped", time.Since(stopped).Round(time.Millisecond))
	since := time.Now().UTC()
	reader := 0
	for i, p := range procs {
		if p == second {
			reader = i
		}
	}
	waitUntil(t, time.Minute, "three ticks under the second leader", func() bool { return after(reader, since) >= 3 })

	// Every node, once caught up, holds the same ticks.
	want := ticks(reader)
	for i, db := range dbs {
		galeraCaughtUp(t, db, table)
		if got := ticks(i); len(got) < len(want) {
			t.Errorf("node %d holds %d ticks, node %d %d", i+1, len(got), reader+1, len(want))
		}
	}
	missing, from, to := testdb.MissingSeconds(slices.Collect(maps.Keys(want)))
	t.Logf("%d ticks from %v to %v, %d seconds without one (the takeover)", len(want), from, to, len(missing))

	// A Galera node takes the wake slots' user locks (GET_LOCK) as its
	// own: each idle worker says once, at info level, that the enqueues
	// of other nodes do not wake it (it finds their jobs by polling).
	for i, l := range logs {
		if n := l.Count(slog.LevelInfo, "on this Galera node only"); n != 1 {
			t.Errorf("node %d: said %d times that only its own node's enqueues wake it, want once: %q", i+1, n, l.Lines(slog.LevelInfo))
		}
	}
}
