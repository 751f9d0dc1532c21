package queue

import (
	"slices"
	"sync"
	"time"
)

// Claims offered to this process's enqueues (PostgreSQL). An idle worker
// learns of a new job when the enqueue's commit's result reaches this
// process (or its NOTIFY reaches the listener) and then claims it: a
// second round trip, on another connection and another server process,
// which made up half of an idle worker's enqueue-to-start. So a claimer
// that goes idle (its last claim found fewer jobs than it asked for)
// posts its next claim on the queue's offerBoard, and the first Enqueue
// of this process that writes a job of one of its types takes it and
// sends the claim inside the insert's own transaction, in the same
// pipeline (insertEarly): the claim's rows come back with the commit's
// result, and the claimer hands them to its executors.
//
// The claim is the claimer's own claim (ClaimJobs with its types, room,
// lease and watermark): it takes the first due jobs in claim order, the
// new job among them only if no older due job is waiting, so nothing
// jumps the queue. It runs in the insert's transaction, so it sees the new
// job, and a job it claims is never seen pending by anyone else, nor
// notified (NotifyUnclaimed): no other worker wakes up for it.
// What can go wrong ends in a claim of the claimer's own:
//   - the insert fails: the claim did not run (the transaction failed
//     whole), the enqueue reports the error as before, and the claimer is
//     told (offerResult.err) and claims as usual;
//   - the claim fails: the transaction failed with it, so the enqueue is
//     sent again without the claim, and the claimer claims as usual;
//   - the enqueue's context ends once the transaction is sent: its
//     outcome is still read (at most dbCallTimeout), so the claimer gets
//     what was claimed and the Enqueue the job's id;
//   - the connection breaks after the commit was sent: as with any claim
//     whose result is lost, what it claimed (if it committed) is left
//     in_progress until its lease passes, and Reclaim runs it again.
//
// A claimer withdraws its offer when it stops being idle (woken, its poll
// timer, its end); an offer already taken cannot be withdrawn, and the
// claimer waits for its outcome (at most dbCallTimeout) and dispatches what
// it claimed like any claim; at its end it does not wait, and the run gives
// back what the offer claimed, never started (claim_late.go). Only the early commit of insertEarly takes
// offers; other enqueues, and other engines, wake the claimer as before.

// offerMaxJobs is the most jobs an offered claim takes, and it takes no
// more than the claimer's free slots: the claim runs inside someone's
// Enqueue, which should not pay for claiming a backlog (a job that appeared
// meanwhile from elsewhere), and a job claimed into the buffer ahead of the
// slots would wait there anyway. A full offered claim makes the claimer
// claim the rest itself at once.
const offerMaxJobs = 10

// claimOffer is an idle claimer's next claim, posted on an offerBoard.
type claimOffer struct {
	types []string // the claimer's types; empty: every type
	max   int      // the most jobs to claim
	lease time.Duration
	after claimPos // where the claim starts (claimCursor.plan)
	// done receives the outcome once, from the enqueue that took the offer
	// (room for one: the taker never waits on the claimer).
	done chan offerResult

	// The claimer's own: when it planned the claim, and whether from the
	// start (claimCursor.advance).
	planned   time.Time
	fromStart bool
	// cancelMark is the queue's cancelLog mark when the offer was posted,
	// before its claim could be sent (control_claimed.go).
	cancelMark uint64
}

// offerResult is the outcome of a taken offer: the rows claimed, in claim
// order, or why the claim did not happen (err; no row was claimed, or
// what was is left to Reclaim, see above).
type offerResult struct {
	rows []*JobRow
	err  error
}

// newClaimOffer returns an offer of a claim of up to max jobs of types,
// leased for lease, starting after after.
func newClaimOffer(types []string, max int, lease time.Duration, after claimPos) *claimOffer {
	return &claimOffer{types: types, max: max, lease: lease, after: after, done: make(chan offerResult, 1)}
}

// wants reports whether the offer's claim could take a job of type typ.
func (o *claimOffer) wants(typ string) bool {
	return len(o.types) == 0 || slices.Contains(o.types, typ)
}

// settle hands the outcome to the claimer. The taker calls it exactly once.
func (o *claimOffer) settle(rows []*JobRow, err error) {
	o.done <- offerResult{rows: rows, err: err}
}

// offerBoard holds the offers of a queue's idle claimers. The zero
// offerBoard is empty and ready.
type offerBoard struct {
	mu     sync.Mutex
	offers []*claimOffer
	// onPost hears each offer posted, and onTake each offer taken, in the
	// taker's goroutine before it runs the claim (tests).
	onPost, onTake func()
}

// post puts o up for the next enqueue of one of its types to take.
func (b *offerBoard) post(o *claimOffer) {
	b.mu.Lock()
	b.offers = append(b.offers, o)
	hook := b.onPost
	b.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// withdraw takes o down, and reports false when an enqueue took it first:
// its outcome then comes on o.done.
func (b *offerBoard) withdraw(o *claimOffer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.offers, o)
	if i < 0 {
		return false
	}
	b.offers = slices.Delete(b.offers, i, i+1)
	return true
}

// take removes and returns the oldest offer that wants a job of type typ,
// or nil. b may be nil (a store that takes no offers).
func (b *offerBoard) take(typ string) *claimOffer {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	var o *claimOffer
	for i, c := range b.offers {
		if c.wants(typ) {
			o = c
			b.offers = slices.Delete(b.offers, i, i+1)
			break
		}
	}
	hook := b.onTake
	b.mu.Unlock()
	if o != nil && hook != nil {
		hook()
	}
	return o
}

// offerTaker is a store whose enqueues may run an idle claimer's claim
// (pgStore's early commit).
type offerTaker interface {
	takesOffers() bool
}

// takesOffers reports whether an enqueue of this process may run an idle
// claimer's claim, so that the claimer should offer it.
func (q *Queue) takesOffers() bool {
	t, ok := q.st.(offerTaker)
	return ok && t.takesOffers()
}
