package queue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestStopEndsCompleterOutageWait: a completion kept through a database
// outage (a proxy between the pool and the server cuts every connection
// and refuses new ones), whose wait before its next write has grown to
// completeOutageWait, is written again as soon as the worker stops (its
// ctx ends, or StopNow), then tried and given up by the shutdown's rule
// (four tries within about a second; the job stays in_progress for
// Reclaim), and Run returns well within the outage's wait. The worker
// does not say the database can be reached when a write after the stop
// could not reach it. Before, the completer slept out the outage's wait
// first (up to 5 s, all of StopNow's time for the shutdown's writes), and
// logged the outage's end at the first write that failed after the stop.
func TestStopEndsCompleterOutageWait(t *testing.T) {
	const bound = 4 * time.Second // the shutdown's tries (about a second) and slack, under completeOutageWait
	forEachStop(t, func(t *testing.T, sc stopCase) {
		forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
			env := newTestEnv(t, kind)
			outage, url := testdb.NewOutage(t, kind)
			db := testdb.OpenURL(t, url)
			logs := &testdb.LogRecorder{}
			q := env.queue(t, db, WithLogger(slog.New(logs)))
			id := enqueue(t, env.queue(t, nil), testArgs{N: 1})
			cfg := fastConfig()
			cfg.MaintenanceInterval = -1 // no leader
			cfg.ShutdownTimeout = time.Minute
			w := q.NewWorker(cfg)
			started, release := make(chan struct{}), make(chan struct{})
			Handle(w, func(ctx context.Context, job *Job[testArgs]) error {
				close(started)
				<-release
				return nil
			})
			run := startStoppable(t, w)
			waitFor(t, started, 10*time.Second, "the handler to start")

			outage.Cut()
			close(release)
			longWait := fmt.Sprintf("retry_in=%v", completeOutageWait)
			waitUntil(t, 30*time.Second, "the completion's wait through the outage to reach "+completeOutageWait.String(), func() bool {
				for _, line := range logs.Lines(slog.LevelDebug) {
					if strings.Contains(line, "completing jobs failed again") && strings.Contains(line, longWait) {
						return true
					}
				}
				return false
			})

			took := run.stop(t, sc, bound, "during the outage")
			if n := logs.Count(slog.LevelError, "completing jobs failed; they stay in_progress until Reclaim"); n != 1 {
				t.Errorf("the completion was given up %d times after the stop (Run returned in %v), want once: %q", n, took, logs.Lines(slog.LevelWarn))
			}
			if n := logs.Count(slog.LevelInfo, "completing jobs again"); n != 0 {
				t.Errorf("the worker said %d times that the database can be reached again, during the outage: %q", n, logs.Lines(slog.LevelInfo))
			}
			if err := outage.Restore(); err != nil {
				t.Fatal(err)
			}
			if j := getJob(t, env.queue(t, nil), id); j.Status != StatusInProgress || j.Attempts != 1 {
				t.Errorf("the job whose completion was given up is %s, attempts %d; want in_progress (left to Reclaim), attempts 1", j.Status, j.Attempts)
			}
		})
	})
}

// TestStopEndsGateWait: a completion that waits at the queue's
// completeGate behind another worker's statement (held here by the test,
// the gate's bound an hour) is written beside it as soon as the worker
// stops (its ctx ends, or StopNow): the job is completed and Run returns
// within a few seconds, the gate still held. Before, the completer waited
// at the gate for its whole bound (completeGateWait, a second by default;
// here an hour) whatever the stop, and Run with it.
func TestStopEndsGateWait(t *testing.T) {
	const bound = 5 * time.Second // far under the gate's hour
	forEachStop(t, func(t *testing.T, sc stopCase) {
		forEachEngine(t, func(t *testing.T, kind engine.Kind) {
			env := newTestEnv(t, kind)
			q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
			q.completes.wait = time.Hour
			// Another worker's completion statement holds the gate.
			if !q.completes.enter(nil) {
				t.Fatal("the test did not enter the free gate")
			}
			var once sync.Once
			leave := func() { once.Do(q.completes.leave) }
			t.Cleanup(leave) // before the queue closes, should the test fail
			id := enqueue(t, q, testArgs{N: 1})
			cfg := fastConfig()
			cfg.MaintenanceInterval = -1 // no leader
			cfg.ShutdownTimeout = time.Minute
			w := q.NewWorker(cfg)
			w.abandonGrace = 2 * bound // the shutdown's time after StopNow
			Handle(w, func(ctx context.Context, job *Job[testArgs]) error { return nil })
			run := startStoppable(t, w)
			waitUntil(t, 10*time.Second, "the completion to wait at the gate", func() bool { return q.completes.waiting.Load() == 1 })

			run.stop(t, sc, bound, "while its completion waits at the gate")
			if j := getJob(t, q, id); j.Status != StatusCompleted {
				t.Errorf("the job is %s after the stop, want completed (written beside the held gate)", j.Status)
			}
			leave()
		})
	})
}

// TestStopEndsCompletionRetryWait: a completion that the database refuses
// (a trigger: a failure that counts, not an outage) is tried again after a
// wait that grows to completeRetryWait times 16 (800 ms) before its last
// try. A worker stopped during that wait with a short shutdown's time
// (StopNow, 20 ms for the shutdown's writes) returns once that time is
// spent, not after the wait, and the completion is given up: the job stays
// in_progress under its claim, for Reclaim, and the log says so. Before,
// the completer slept out its wait first, and Run returned about 800 ms
// after the stop, long after the time of the shutdown's writes.
func TestStopEndsCompletionRetryWait(t *testing.T) {
	const (
		abandon  = 20 * time.Millisecond  // the shutdown's time after StopNow
		lastWait = 16 * completeRetryWait // the wait before the last try
	)
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		refuseRows(t, env, "UPDATE", "NEW.status = 'completed'")
		var refusals atomic.Int32
		lastWaits := make(chan struct{})
		logs := &testdb.LogRecorder{}
		q := env.queue(t, nil, WithLogger(slog.New(logs)), withAfterCompleteHook(func(err error) error {
			if err != nil && refusals.Add(1) == completeTries-1 {
				close(lastWaits) // the completer waits lastWait now
			}
			return err
		}))
		id := enqueue(t, q, testArgs{N: 1})
		cfg := fastConfig()
		cfg.MaintenanceInterval = -1 // no leader
		cfg.ShutdownTimeout = time.Minute
		w := q.NewWorker(cfg)
		w.abandonGrace = abandon
		Handle(w, func(ctx context.Context, job *Job[testArgs]) error { return nil })
		run := startStoppable(t, w)
		waitFor(t, lastWaits, 20*time.Second, fmt.Sprintf("the completion's refusal number %d", completeTries-1))

		took := run.stop(t, stopCase{stopNow: true}, 10*time.Second, "while its completer waits to try again")
		if took >= lastWait*3/4 { // 600 ms: a loaded machine's slack, still short of the wait
			t.Errorf("Run returned %v after StopNow, whose shutdown's writes had %v: the completer slept out its wait of %v first", took.Round(time.Millisecond), abandon, lastWait)
		}
		if j := getJob(t, q, id); j.Status != StatusInProgress || j.Attempts != 1 {
			t.Errorf("after Run the job is %s, attempts %d; want in_progress (its completion given up, left to Reclaim), attempts 1", j.Status, j.Attempts)
		}
		if n := logs.Count(slog.LevelError, "in_progress until Reclaim"); n == 0 {
			t.Errorf("no error logged for the completion given up; logs: %q", logs.Lines(slog.LevelWarn))
		}
	})
}
