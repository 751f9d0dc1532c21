package queue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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
	cases := []struct {
		name    string
		stopNow bool // StopNow, else the end of Run's ctx
	}{
		{name: "ctx ends"},
		{name: "StopNow", stopNow: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
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
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- w.Run(ctx) }()
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

				stopped := time.Now()
				if tc.stopNow {
					w.StopNow()
				} else {
					cancel()
				}
				if err := waitFor(t, done, bound, "Run to return during the outage"); err != nil {
					t.Errorf("Run: %v", err)
				}
				took := time.Since(stopped)
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
}
