package queue

// The WAL checkpointer (SQLite). In WAL mode SQLite writes each commit to
// the log and copies the log back into the database file in a checkpoint;
// by default the commit that takes the log past 1 000 pages runs that
// checkpoint itself (wal_autocheckpoint), and the statement that commits —
// an Enqueue, a claim, a batch of completions — waits for the copy and its
// fsync. In bench's latency phase those were the slowest jobs: p99 6-7 ms
// against a p50 of 0.4 ms. So a worker on SQLite checkpoints in the
// background, every walCheckpointEvery, with PRAGMA
// wal_checkpoint(PASSIVE), which waits for no reader or writer: the log
// then seldom reaches 1 000 pages between two checkpoints, and the commits
// do not copy it. bench --jobs 20000 --workers 8 --latency-jobs 400, 4
// alternating pairs: p99 1.31, 1.30, 1.48, 2.20 ms against 6.06, 1.97,
// 6.98, 6.69 ms without it (docs/performance.md). A checkpoint that fails
// is logged; the commits then checkpoint, as SQLite does by default.

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// walCheckpointEvery is how often a worker on SQLite checkpoints the WAL.
const walCheckpointEvery = 250 * time.Millisecond

// walCheckpointer is a store whose database keeps a write-ahead log that a
// worker checkpoints in the background (SQLite).
type walCheckpointer interface {
	checkpointWAL(ctx context.Context) error
}

// checkpointer checkpoints the WAL every interval until its context ends.
// Each Worker runs one; the checkpointers of one Queue's workers share a
// gate, so that one of them checkpoints per interval however many workers
// run. It owns nothing but its ticker; a failed checkpoint is logged once
// until one succeeds again.
type checkpointer struct {
	st       walCheckpointer
	log      *slog.Logger
	interval time.Duration
	gate     *checkpointGate // the Queue's
	failures failureStreak   // of the checkpoints, logged once a run
}

// checkpointGate lets one checkpoint start per interval among the
// checkpointers of one Queue's workers. Its zero value is ready.
type checkpointGate struct {
	last atomic.Int64 // when the last checkpoint started, Unix nanoseconds; 0: never
}

// take reports whether a checkpoint may start at now, and if so records
// it: none started less than gap before now. A last start after now (the
// wall clock went back) does not hold the next one back.
func (g *checkpointGate) take(now time.Time, gap time.Duration) bool {
	at := now.UnixNano()
	for {
		last := g.last.Load()
		if since := at - last; last != 0 && since >= 0 && since < int64(gap) {
			return false
		}
		if g.last.CompareAndSwap(last, at) {
			return true
		}
	}
}

// run checkpoints every c.interval until ctx ends (tick).
func (c *checkpointer) run(ctx context.Context) {
	ticker := time.NewTicker(c.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			c.tick(ctx, now)
		}
	}
}

// tick checkpoints at now, unless another worker's checkpointer of the
// Queue checkpointed less than three quarters of an interval before (their
// tickers are out of phase: with a whole interval, a tick a little early
// would skip, and the WAL wait two intervals).
func (c *checkpointer) tick(ctx context.Context, now time.Time) {
	if !c.gate.take(now, c.interval*3/4) {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	err := c.st.checkpointWAL(cctx)
	cancel()
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopping: not a failure.
	case err != nil:
		if c.failures.failed() {
			c.log.Warn("checkpointing the WAL failed; commits checkpoint it meanwhile (wal_autocheckpoint); trying again", "err", err, "every", c.interval)
		}
	default:
		if n, _ := c.failures.succeeded(); n > 0 {
			c.log.Info("checkpointing the WAL works again")
		}
	}
}
