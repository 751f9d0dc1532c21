package queue

import (
	"context"
	"testing"
	"time"
)

// stopCase is one of the two ways a worker's Run is stopped: the end of
// its ctx, or StopNow.
type stopCase struct {
	name    string
	stopNow bool
}

// stopCases are the two ways a worker stops: its Run's context ends, or
// StopNow.
func stopCases() []stopCase {
	return []stopCase{{name: "ctx ends"}, {name: "StopNow", stopNow: true}}
}

// forEachStop runs test once for each stopCase, as parallel subtests.
func forEachStop(t *testing.T, test func(t *testing.T, sc stopCase)) {
	for _, sc := range stopCases() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			test(t, sc)
		})
	}
}

// stoppableRun is a Run of a worker in the background, to be stopped the
// way of a stopCase.
type stoppableRun struct {
	w      *Worker
	cancel context.CancelFunc
	done   chan error
}

// startStoppable starts w.Run on a ctx of its own, ended at the test's end
// at the latest.
func startStoppable(t *testing.T, w *Worker) *stoppableRun {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &stoppableRun{w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	return r
}

// stop stops the run as sc says and waits within for Run to return
// (failing the test as waitFor does, naming what it waited during), reports
// an error Run returned, and returns how long Run took after the stop.
func (r *stoppableRun) stop(t *testing.T, sc stopCase, within time.Duration, during string) time.Duration {
	t.Helper()
	stopped := time.Now()
	if sc.stopNow {
		r.w.StopNow()
	} else {
		r.cancel()
	}
	if err := waitFor(t, r.done, within, "Run to return "+during); err != nil {
		t.Errorf("Run: %v", err)
	}
	return time.Since(stopped)
}
