package queue

import (
	"errors"
	"time"
)

// A claim in flight when the worker stops. The claimer does not wait for
// it: it returns at once, so that the handlers' grace starts (and StopNow
// cancels them) at once, whatever holds the claim up (a lock on the table,
// SQLite's write lock held elsewhere: up to dbCallTimeout and the claim's
// retries). The claim is not cancelled by the stop (one cut off after its
// commit was sent leaves rows claimed by nobody until their lease passes);
// it goes on, on the context of the shutdown's writes (run.writesCtx), so
// that the end of the shutdown's budget ends it. The jobs it claims are
// never started: they are given back (pending as before their claim, the
// attempt not counted), fenced by their claim tokens, through the run's
// giver or with the attempts released at the end. An enqueue that had
// taken the claimer's offered claim (claim_offer.go) is handled the same
// way. Whatever the budget's end cuts off stays in_progress until its
// lease passes and Reclaim takes it back: no job is lost, and none runs
// twice at once.

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

// handBack waits in the background for late (nil: none) and puts the
// jobs it claimed on the releaseList, to give back; the channel it returns
// is closed once that is done. It waits as long as the shutdown's writes
// may (whose end also ends the claim): a claim that returns later is left,
// and what it claimed stays in_progress until Reclaim.
func (r *run) handBack(late *lateClaim) <-chan struct{} {
	done := make(chan struct{})
	if late == nil {
		close(done)
		return done
	}
	// The run stopped: its writes, the late claim among them, end
	// within the shutdown's time, also when no handler was running.
	r.spendWithin(r.stopBudget())
	go func() {
		defer close(done)
		select {
		case res := <-late.done:
			late.closeSession()
			r.giveBackLate(res)
		case <-r.writesCtx().Done():
			r.log.Warn("a claim in flight when the worker stopped did not return within the shutdown's time; what it claimed, if anything, stays in_progress until its lease passes and Reclaim takes it back")
			go func() { // its context has ended: it returns soon
				<-late.done
				late.closeSession()
			}()
		}
	}()
	return done
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
		r.released.giveBack(row, errStoppedWhileClaiming)
	}
}

// stopBudget is how long the shutdown's writes may take from the run's
// stop: ShutdownTimeout and the grace of cut-off handlers after it, only
// that grace after StopNow (as awaitExecutors sets it).
func (r *run) stopBudget() time.Duration {
	if r.stoppedNow != nil && r.stoppedNow.Err() != nil {
		return r.abandon
	}
	return max(r.cfg.ShutdownTimeout, 0) + r.abandon
}
