package queue

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// refusingArgs are args whose encoding fails while refuse is set.
type refusingArgs struct{ refuse *atomic.Bool }

func (refusingArgs) Kind() string { return "tick" }

func (a refusingArgs) MarshalJSON() ([]byte, error) {
	if a.refuse.Load() {
		return nil, errors.New("the report's template is missing")
	}
	return []byte(`{}`), nil
}

// TestPeriodicSkippedTicksLoggedOncePerRun: the ticks of a periodic job
// that fail one after the other are logged at error level for the first
// of them only (then at debug level), and the first tick enqueued after
// them says how many were skipped. Before, every tick logged an error: an
// @every 1s job whose args no longer encode logged one a second.
func TestPeriodicSkippedTicksLoggedOncePerRun(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.SQLite)
	logs := &testdb.LogRecorder{}
	q := env.queue(t, nil, WithLogger(slog.New(logs)))
	e, f, term := leadingElector(t, q)
	var refuse atomic.Bool
	start := time.Now().UTC().Truncate(time.Minute)
	p := Periodic("report", everyFrom{start: start, period: time.Second}, refusingArgs{refuse: &refuse})
	s := &scheduler{q: q, log: q.logger, el: e, jobs: []PeriodicJob{p}}
	const skipped = "the tick is skipped"
	for i, step := range []struct {
		refuse bool
		errors int // in all, after the tick
	}{
		{true, 1}, {true, 1}, {true, 1}, // one run of failures: one error
		{false, 1},           // enqueued again
		{true, 2}, {true, 2}, // a new run: one more
	} {
		refuse.Store(step.refuse)
		if !s.enqueue(term, f, p, start.Add(time.Duration(i)*time.Second)) {
			t.Fatal("enqueue reported the act refused")
		}
		if n := logs.Count(slog.LevelError, skipped); n != step.errors {
			t.Fatalf("after tick %d (refused %v): %d errors %q, want %d: %q", i, step.refuse, n, skipped, step.errors, logs.Lines(slog.LevelWarn))
		}
	}
	again := 0
	for _, l := range logs.Lines(slog.LevelInfo) {
		if strings.HasPrefix(l, "periodic job enqueued again after skipped ticks") && strings.Contains(l, " skipped=3") {
			again++
		}
	}
	if again != 1 {
		t.Errorf("%d info lines saying 3 ticks were skipped before, want 1: %q", again, logs.Lines(slog.LevelInfo))
	}
	if n := env.countWhere(t, "name = 'tick'"); n != 1 {
		t.Errorf("%d jobs of the periodic job, want the 1 tick whose args encoded", n)
	}
}
