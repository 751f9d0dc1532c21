package queue

// Who counts a cancelled attempt (Event.Outcome OutcomeCancelled): the
// worker that ran it, or the process whose Cancel ended it. Every attempt
// is counted once, by one of the two, decided by one rule from what both
// can know: the attempt's lease_until as the row held it when the cancel
// ended it, and the cancel's finished_at.

import "time"

// cancelCountedByCanceller reports whether the process whose Cancel ended
// an in_progress attempt counts it (EventCancelled) rather than the worker
// that ran it (its EventLost, OutcomeCancelled, with CountedByCancel
// false). lease is the attempt's lease_until as the row held it when the
// cancel statement changed the row (nil: none), at is the cancel's
// finished_at. The canceller counts the attempts whose lease had passed
// then: their worker is presumed dead, and no one else would count them;
// a worker that was alive after all (late: its lease passed unrenewed)
// finds the same answer from its last written lease and the row's
// finished_at, and does not count it again. The two times are compared to
// the second, below every engine's precision (MySQL's DATETIME keeps whole
// seconds), so that the canceller, which reads the lease as stored, and
// the worker, which knows it as written, decide alike; a lease that ends
// within the cancel's second is not passed (as Reclaim, which takes only
// leases before its now).
func cancelCountedByCanceller(lease *time.Time, at time.Time) bool {
	if lease == nil {
		// No lease: no attempt of ours holds it (another version 2
		// client's row); no worker here counts it.
		return true
	}
	return lease.Truncate(time.Second).Before(at.Truncate(time.Second))
}

// cancelledRun is an in_progress attempt that a cancel statement ended:
// its job's type and the lease_until its row held then (nil: none).
type cancelledRun struct {
	typ   string
	lease *time.Time
}

// countByCanceller adds to counts, per type, the attempts of runs, ended
// by a cancel at at, that the canceller counts (cancelCountedByCanceller).
func countByCanceller(counts map[string]int64, runs []cancelledRun, at time.Time) {
	for _, r := range runs {
		if cancelCountedByCanceller(r.lease, at) {
			counts[r.typ]++
		}
	}
}
