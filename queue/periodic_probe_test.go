package queue

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// flakyProbeStore is a store whose probe of the unique keys' side table
// fails its first fails calls, as during a dropped connection.
type flakyProbeStore struct {
	store
	fails int32
	calls atomic.Int32
}

func (s *flakyProbeStore) probeUnique(ctx context.Context, d dbtx) error {
	if s.calls.Add(1) <= s.fails {
		return errors.New("driver: bad connection")
	}
	return s.store.probeUnique(ctx, d)
}

// TestPeriodicTickOutlivesFailedProbe: a tick whose check of the unique
// keys' side table fails for a moment (the first tick of a run whose
// check at Run failed too) is tried again like a failed enqueue, and
// enqueued once the database answers. Before, the check ran once before
// the tries and its failure skipped the tick at once.
func TestPeriodicTickOutlivesFailedProbe(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.SQLite)
	logs := &testdb.LogRecorder{}
	q := env.queue(t, nil, WithLogger(slog.New(logs)))
	q.unique.ok.Store(false) // not checked yet
	q.st = &flakyProbeStore{store: q.st, fails: 2}
	e, f, term := leadingElector(t, q)
	tick := time.Now().UTC().Truncate(time.Minute)
	p := Periodic("probe", everyFrom{start: tick, period: time.Hour}, kindArgs{K: "tick"})
	s := &scheduler{q: q, log: q.logger, el: e, jobs: []PeriodicJob{p}}
	if !s.enqueue(term, f, p, tick) {
		t.Fatal("enqueue reported the act refused")
	}
	if n := env.countWhere(t, "name = 'tick'"); n != 1 {
		t.Errorf("%d jobs of the tick after 2 failed checks of the side table, want 1; logs: %q", n, logs.Lines(slog.LevelWarn))
	}
	if n := logs.Count(slog.LevelError, "the tick is skipped"); n != 0 {
		t.Errorf("the tick was skipped: %q", logs.Lines(slog.LevelWarn))
	}
}
