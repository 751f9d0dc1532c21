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

// failingExpireStore is a store whose expire fails while failing is set.
type failingExpireStore struct {
	store
	failing atomic.Bool
}

func (s *failingExpireStore) expire(ctx context.Context, d dbtx, now time.Time, max int) (int64, error) {
	if s.failing.Load() {
		return 0, errors.New("expire: the server is out of disk space")
	}
	return s.store.expire(ctx, d, now, max)
}

// TestMaintenanceFailureLoggedOncePerRun: an operation of the maintenance
// that fails pass after pass is logged as a warning at its first failure
// only (then at debug level), and once more at the first failure after it
// worked again. Before, every pass logged the failure as a warning: with a
// short MaintenanceInterval, several warnings a second for as long as the
// cause lasted.
func TestMaintenanceFailureLoggedOncePerRun(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.SQLite)
	logs := &testdb.LogRecorder{}
	q := env.queue(t, nil, WithLogger(slog.New(logs)))
	st := &failingExpireStore{store: q.st}
	q.st = st
	ctx := context.Background()
	e, f, term := leadingElector(t, q)
	m := &maintainer{q: q, log: q.logger, el: e, interval: time.Millisecond}
	const warning = "expiring overdue jobs failed"
	for _, step := range []struct {
		fail     bool
		warnings int // in all, after the pass
	}{
		{true, 1}, {true, 1}, {true, 1}, // one run of failures: one warning
		{false, 1},           // works again
		{true, 2}, {true, 2}, // a new run: one more
	} {
		st.failing.Store(step.fail)
		m.pass(ctx, term, f)
		if n := logs.Count(slog.LevelWarn, warning); n != step.warnings {
			t.Fatalf("after a pass whose expire failed=%v: %d warnings %q, want %d: %q",
				step.fail, n, warning, step.warnings, logs.Lines(slog.LevelWarn))
		}
	}
	if n := logs.Count(slog.LevelInfo, "expiring overdue jobs works again"); n != 1 {
		t.Errorf("%d info lines saying the expire works again, want 1: %q", n, logs.Lines(slog.LevelInfo))
	}
}
