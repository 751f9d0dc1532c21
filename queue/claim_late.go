package queue

import (
	"context"
	"errors"
	"time"
)

// A claim in flight when the worker stops. The claimer does not wait for
// it: it returns at once, so that the handlers' grace starts (and StopNow
// cancels them) at once, whatever holds the claim up (a lock on the table,
// SQLite's write lock held elsewhere: up to dbCallTimeout and the claim's
// retries). While handlers run (the grace) the claim goes on, on the
// context of the shutdown's writes (run.writesCtx), whose end ends it. Once
// no handler runs (at once when none ran at the stop), nothing but the
// claim would hold Run: it is cancelled (errClaimCancelledAtStop) and
// waited for lateClaimCancelWait at most. Before, a stop with no handler
// running waited for it up to dbCallTimeout (30 s), the default
// ShutdownTimeout and its 5 seconds being longer. The jobs a late claim
// takes are never started: they are given back (pending as before their
// claim, the attempt not counted), fenced by their claim tokens, through
// the run's giver or with the attempts released at the end. A claim
// cancelled after its commit was sent, whose outcome is unknown
// (claimUnsure), gives back what it may have taken itself
// (Queue.giveBackUnsure), before it returns, on a context of the run's
// (claimer.giveBacks) that ends with the shutdown's writes and once the
// run waits no longer for the claim: so the wait covers that give-back
// too, and when the wait ends the give-back is cancelled with the claim,
// and Run returns only once the claim's goroutine has (a statement whose
// context ended returns at once on every engine). Before, the give-back
// ran on a context of its own, up to dbCallTimeout (30 s), that Run did
// not wait for: it could still hold a connection, and write, after Run
// had returned (a table locked against reads, PostgreSQL's LOCK TABLE …
// ACCESS EXCLUSIVE, held it until the lock was released), or fail with
// "sql: database is closed" when the caller closed its pool then.
// An enqueue that had taken the claimer's offered claim (claim_offer.go)
// is handled the same way, though its claim, in the enqueue's transaction,
// is not cancelled, nor waited for beyond the wait: it is the enqueue's,
// not the run's, and tells its outcome without waiting for a reader.
// Whatever a claim takes that is not waited for stays in_progress until
// its lease passes and Reclaim takes it back: no job is lost, and none
// runs twice at once.

// lateClaimCancelWait is how long a stopped run waits for its claim in
// flight once it cancelled it (errClaimCancelledAtStop): a cancelled
// statement returns within milliseconds on every engine (PostgreSQL and
// MySQL close its connection, SQLite's busy wait ends).
const lateClaimCancelWait = time.Second

// errClaimCancelledAtStop is the cause with which a stopped run cancels its
// claim in flight once no handler runs.
var errClaimCancelledAtStop = errors.New("jobqueue: the worker stopped and no handler runs: its claim in flight is cancelled")

// errStoppedWhileClaiming is the cause given with the jobs that a claim in
// flight when the worker stopped took: they are given back, never started.
var errStoppedWhileClaiming = errors.New("jobqueue: claimed job not started: the worker stopped while its claim ran")

// lateClaim is a claim that was in flight when the claimer stopped.
type lateClaim struct {
	// done receives the claim's outcome, once.
	done <-chan offerResult
	// cursor is the claimer's cursor, whose claim session the claim runs
	// on (closed once the claim returned); nil for an enqueue's offered
	// claim, which runs on the enqueue's connection.
	cursor *claimCursor
}

// closeSession gives up the claim session the late claim ran on, if any.
func (l *lateClaim) closeSession() {
	if l.cursor != nil {
		l.cursor.closeSession()
	}
}

// ours reports whether the late claim is the claimer's own, run by a
// goroutine of the run (claimer.claimOrStop), not an enqueue's offered
// claim.
func (l *lateClaim) ours() bool { return l.cursor != nil }

// handBack waits in the background for late (nil: none) and puts the
// jobs it claimed on the releaseList, to give back; the channel it returns
// is closed once that is done. It waits as long as the shutdown's writes
// may (whose end also ends the claim), and once claims has ended (no
// handler runs: the claim is cancelled) lateClaimCancelWait more at most.
// A claim that has not told its outcome then is left, and what it claimed
// stays in_progress until Reclaim: endGiveBacks (cause
// errLateClaimGivenUp) cancels the give-back it may be running
// (claimUnsure), and the claimer's own claim is waited for until its
// goroutine returns, at once, its contexts all ended, so that nothing of
// the run's still runs once Run returns.
func (r *run) handBack(late *lateClaim, claims context.Context, endGiveBacks context.CancelCauseFunc) <-chan struct{} {
	done := make(chan struct{})
	if late == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		res, ok := r.awaitLate(late, claims)
		if !ok {
			endGiveBacks(errLateClaimGivenUp)
			if late.ours() {
				<-late.done
				late.closeSession()
			}
			return
		}
		late.closeSession()
		r.giveBackLate(res)
	}()
	return done
}

// errLateClaimGivenUp is the cause with which a stopped run cancels the
// give-back of its claim in flight (claimUnsure) once it waits for the
// claim no longer.
var errLateClaimGivenUp = errors.New("jobqueue: the worker stopped and waits no longer for its claim in flight: its give-back is cancelled")

// awaitLate waits for the outcome of late, within the shutdown's time and,
// once claims has ended, lateClaimCancelWait at most; false when it did
// not come.
func (r *run) awaitLate(late *lateClaim, claims context.Context) (offerResult, bool) {
	writes := r.writesCtx()
	select {
	case res := <-late.done:
		return res, true
	case <-claims.Done():
	}
	if writes.Err() == nil {
		t := time.NewTimer(lateClaimCancelWait)
		defer t.Stop()
		select {
		case res := <-late.done:
			return res, true
		case <-writes.Done():
		case <-t.C:
			r.log.Warn("a claim in flight when the worker stopped did not return once cancelled (or its give-back did not end); the worker cancels its give-back and stops: what it claimed, if anything, may stay in_progress until its lease passes and Reclaim takes it back", "waited", lateClaimCancelWait)
			return offerResult{}, false
		}
	}
	r.log.Warn("a claim in flight when the worker stopped did not return within the shutdown's time; what it claimed, if anything, stays in_progress until its lease passes and Reclaim takes it back")
	return offerResult{}, false
}

// giveBackLate puts the jobs that res, the outcome of a claim in flight
// when the worker stopped, claimed on the releaseList, to give back. They
// are told to listeners as claimed, then given back.
func (r *run) giveBackLate(res offerResult) {
	if res.err != nil {
		r.log.Debug("the claim in flight when the worker stopped failed; nothing to give back", "err", res.err)
		return
	}
	if len(res.rows) == 0 {
		return
	}
	r.log.Info("the worker stopped while a claim ran: giving back the jobs it claimed, not started", "jobs", len(res.rows))
	for _, row := range res.rows {
		r.q.emit(Event{Kind: EventClaimed, Job: row})
		r.released.giveBack(row, claimedLease(row), errStoppedWhileClaiming)
	}
}
