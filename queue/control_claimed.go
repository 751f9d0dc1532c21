package queue

// Cancels of claimed jobs not yet started. A worker's claimer may hold a
// claimed job for a while before an executor starts it (in the buffer ahead
// of the slots, or on its way to a free one). A heartbeat would find the
// job cancelled, but only at the next one (a third of the lease by
// default). So the queue keeps a log of the jobs its own Cancel calls
// ended, numbered: a claim notes the log's number before it is sent, and
// an executor about to start an attempt whose job the log names after that
// number reads the job first (stillHeld) and does not start it when the
// cancel fenced it off. Attempts of other jobs cost one atomic load. An
// attempt that waited startCheckAfter or longer is read too, for the
// cancels of other processes: after one of those has returned, the job
// starts only if its claim was less than startCheckAfter before the start.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// startCheckAfter: an attempt that waited this long or longer between its
// claim and its start (in the buffer, behind slow handlers) is read before
// it starts, so that a cancel from another process that returned meanwhile
// stops it, rather than the next heartbeat. One read per such attempt,
// whose handlers take long enough that a read is small beside them.
const startCheckAfter = time.Second

// maxCancelLog bounds the ids the log keeps; past it the log forgets them,
// and every attempt claimed before that is read before it starts.
const maxCancelLog = 10000

// cancelLog is a queue's log of the jobs its Cancel calls ended. Its zero
// value is ready and it is safe for concurrent use.
type cancelLog struct {
	// seq is bumped by each record; read without the lock.
	seq atomic.Uint64
	mu  sync.Mutex
	at  map[int64]uint64 // job id → seq of its latest cancel
	// floor: the cancels of seq below it were forgotten.
	floor uint64
}

// mark is the log's number now: a claim notes it before it is sent.
func (l *cancelLog) mark() uint64 { return l.seq.Load() }

// record logs ids as cancelled now (their cancel has committed).
func (l *cancelLog) record(ids []int64) {
	if len(ids) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at == nil || len(l.at)+len(ids) > maxCancelLog {
		l.at = make(map[int64]uint64, len(ids))
		l.floor = l.seq.Load() + 1
	}
	n := l.seq.Load() + 1
	for _, id := range ids {
		l.at[id] = n
	}
	l.seq.Store(n)
}

// maybeCancelled reports whether job id may have been cancelled through
// this queue after mark: then its attempt claimed at mark must be read
// before it starts.
func (l *cancelLog) maybeCancelled(id int64, mark uint64) bool {
	if l.seq.Load() == mark {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return mark+1 < l.floor || l.at[id] > mark
}

// readBeforeStart reports whether attempt a, about to start, must first
// be read (lostSinceClaim): its queue cancelled its job after a's claim was
// sent (cancelLog.maybeCancelled), or a waited startCheckAfter or longer
// since its claim, time in which another process may have cancelled it.
func (e *executors) readBeforeStart(a *attempt) bool {
	return e.q.cancels.maybeCancelled(a.row.ID, a.cancelMark) || !e.q.now().Before(a.claimedAt.Add(startCheckAfter))
}

// lostSinceClaim reads the job of attempt a, about to start (see
// readBeforeStart), and reports true when a must not start: a no longer
// holds its job (a cancel fenced it off, or the job was reclaimed: the
// attempt is lost, its handler never runs), or the read failed (a is given
// back, fenced by its claim token: a cancelled job stays as it is, one
// retried meanwhile runs later). It reports false when a still holds its
// job.
func (e *executors) lostSinceClaim(a *attempt) bool {
	ctx, cancel := context.WithTimeout(e.dbCtx, dbCallTimeout)
	stale, _, err := e.q.stillHeld(ctx, []attemptRef{a.ref})
	cancel()
	switch {
	case err != nil:
		e.attempts.remove(a.ref)
		e.giveBack(a, "reading whether it still holds its job (it may have been cancelled since the claim) failed: "+err.Error())
		return true
	case len(stale) > 0:
		e.attempts.remove(a.ref)
		e.log.Info("claimed job not started: it was cancelled (or reclaimed) before it began", "job_id", a.row.ID, "kind", a.row.Name)
		e.q.lost(e.dbCtx, a.row, e.attempts.written(a), nil, 0)
		return true
	}
	return false
}
