package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// fakeCheckpoints is a walCheckpointer whose checkpoints fail or succeed in
// the order of outcomes (then succeed), each call heard on calls.
type fakeCheckpoints struct {
	mu       sync.Mutex
	outcomes []error
	calls    chan struct{}
}

func (f *fakeCheckpoints) checkpointWAL(context.Context) error {
	f.mu.Lock()
	var err error
	if len(f.outcomes) > 0 {
		err, f.outcomes = f.outcomes[0], f.outcomes[1:]
	}
	f.mu.Unlock()
	select {
	case f.calls <- struct{}{}:
	default:
	}
	return err
}

// TestCheckpointer: the checkpointer checkpoints every interval; a streak
// of failed checkpoints is logged once (Warn), its end once (Info); it
// stops when its context ends. Two streaks here: calls 2-4 and call 7 (from
// the eighth on, every checkpoint succeeds).
func TestCheckpointer(t *testing.T) {
	t.Parallel()
	failed := errors.New("disk I/O error")
	f := &fakeCheckpoints{outcomes: []error{nil, failed, failed, failed, nil, nil, failed}, calls: make(chan struct{}, 1)}
	logs := &testdb.LogRecorder{}
	c := &checkpointer{st: f, log: slog.New(logs), interval: time.Millisecond, gate: &checkpointGate{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx) }()
	for i := range 8 {
		waitFor(t, f.calls, 10*time.Second, fmt.Sprintf("checkpoint %d", i+1))
	}
	cancel()
	waitFor(t, done, 10*time.Second, "the checkpointer to stop with its context")
	if n := logs.Count(slog.LevelWarn, "checkpointing the WAL failed"); n != 2 {
		t.Errorf("%d warnings of failed checkpoints, want 2 (one per streak):\n%v", n, logs.Lines(slog.LevelDebug))
	}
	if n := logs.Count(slog.LevelInfo, "checkpointing the WAL works again"); n != 2 {
		t.Errorf("%d notes that checkpoints work again, want 2 (one per streak's end):\n%v", n, logs.Lines(slog.LevelDebug))
	}
}

// TestCheckpointGate: the checkpointers of one Queue's workers share a
// gate that lets a checkpoint start only when none started less than the
// gap before, so that several workers checkpoint once per interval between
// them; a last start in the future (the wall clock went back) holds nothing
// back.
func TestCheckpointGate(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	const gap = 150 * time.Millisecond
	// Two workers' ticks (every 200 ms, out of phase by 50 ms) in time
	// order, and whether each may checkpoint.
	steps := []struct {
		at   time.Duration // since t0
		want bool
	}{
		{0, true},                       // the first ever
		{50 * time.Millisecond, false},  // the other worker, 50 ms later
		{200 * time.Millisecond, true},  // 200 ms after the last start
		{250 * time.Millisecond, false}, // 50 ms after it
		{349 * time.Millisecond, false}, // 149 ms after it: within the gap
		{350 * time.Millisecond, true},  // 150 ms after it
		{-time.Hour, true},              // the clock went back an hour
		{-time.Hour + time.Millisecond, false},
	}
	var g checkpointGate
	for i, s := range steps {
		if got := g.take(t0.Add(s.at), gap); got != s.want {
			t.Errorf("step %d (t0%+v): take = %v, want %v", i, s.at, got, s.want)
		}
	}

	// Two workers' checkpointers of one Queue, every 200 ms, their ticks
	// 50 ms apart: one checkpoint per interval between them.
	f := &fakeCheckpoints{calls: make(chan struct{}, 100)}
	var shared checkpointGate
	a := &checkpointer{st: f, log: testdb.QuietLogger(), interval: 200 * time.Millisecond, gate: &shared}
	b := &checkpointer{st: f, log: testdb.QuietLogger(), interval: 200 * time.Millisecond, gate: &shared}
	for i := range 5 {
		at := t0.Add(time.Duration(i) * 200 * time.Millisecond)
		a.tick(context.Background(), at)
		b.tick(context.Background(), at.Add(50*time.Millisecond))
	}
	if n := len(f.calls); n != 5 {
		t.Errorf("two checkpointers sharing a gate checkpointed %d times in 5 intervals, want 5", n)
	}
}

// TestWorkerCheckpointsWAL: a worker on SQLite checkpoints the WAL in the
// background, so that the database file holds the jobs once the WAL was
// copied into it, although the pool's commits never checkpoint
// (wal_autocheckpoint(0)); without the checkpointer the jobs stay in the
// WAL and the database file keeps the size the install left.
func TestWorkerCheckpointsWAL(t *testing.T) {
	t.Parallel()
	const jobs = 2000
	for _, tc := range []struct {
		name  string
		every time.Duration // withWALCheckpointEvery
		want  bool          // the database file grows
	}{
		{"with the checkpointer", 20 * time.Millisecond, true},
		{"without", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, engine.SQLite)
			// The queue's own pool, whose commits never checkpoint; the
			// env's pool only installed the table and counts below.
			db := env.newPoolWith(t, "_pragma=wal_autocheckpoint(0)")
			q := env.queue(t, db, WithLogger(testdb.QuietLogger()), withWALCheckpointEvery(tc.every))
			path := strings.TrimPrefix(env.url, "sqlite:")
			size := func() int64 {
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				return st.Size()
			}
			installed := size()
			enqueueSeq(t, q, jobs)
			w := q.NewWorker(WorkerConfig{Concurrency: 8, MaintenanceInterval: -1})
			Handle(w, func(ctx context.Context, job *Job[seqArgs]) error { return nil })
			stop, _ := startWorker(t, w)
			waitUntil(t, 30*time.Second, "the jobs to complete", func() bool {
				return env.countWhere(t, "status = 'completed'") == jobs
			})
			// The jobs' rows take more than this in the file once copied.
			const grown = 256 << 10
			if tc.want {
				waitUntil(t, 30*time.Second, "the WAL to be copied into the database file", func() bool { return size()-installed >= grown })
			}
			if err := stop(10 * time.Second); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !tc.want {
				if got := size() - installed; got >= grown {
					t.Errorf("the database file grew by %d bytes without the checkpointer; want the jobs in the WAL only, or the test observes nothing", got)
				}
			}
		})
	}
}
