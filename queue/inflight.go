package queue

import (
	"context"
	"sync"
	"time"
)

// attempt is one claimed job on its way through the worker: the claimer
// makes it, an executor runs it, the completer writes its success, and the
// heartbeater renews its lease while it is in the run's inflightSet.
type attempt struct {
	row    *JobRow
	ref    attemptRef
	ctx    context.Context
	cancel context.CancelCauseFunc
	// leaseEnd is when the attempt's lease ends at the latest, as far as
	// the worker knows (guarded by inflightSet.mu): the claim's
	// lease_until, then the end each heartbeat that renewed it wrote.
	leaseEnd time.Time
	// leaseWritten is the lease_until the worker last wrote for it and
	// knows written (guarded by inflightSet.mu): the claim's, then that of
	// each heartbeat that renewed it. When the attempt turns out cancelled
	// it tells, with the cancel's finished_at, whether the canceller
	// counted it (cancelCountedByCanceller; Queue.lost).
	leaseWritten time.Time
	// settling: its handler has returned and its result is being
	// written: a completion with the completer, or a failure the executor
	// records (guarded by inflightSet.mu).
	settling bool
	// cancelMark is the queue's cancelLog mark taken before its claim was
	// sent: a job cancelled through the queue after it is read before its
	// handler starts (control_claimed.go).
	cancelMark uint64
	// claimedAt is when the claimer handed it on, by the queue's clock: an
	// attempt that waited startCheckAfter or longer is read before it
	// starts (control_claimed.go).
	claimedAt time.Time
}

// inflightSet is the register of one run's claimed attempts that still
// hold their jobs as far as the worker knows: those whose handlers have
// not returned, and those whose result is not yet written or given up
// (settling). The claimer adds to it; the executor that ran an attempt
// removes it, or marks it settling (markSettling) while it records a
// failure or hands a success to the completer, which removes it once its
// completion is written, refused or given up (removeSettled); the
// heartbeater reads it and moves leaseEnd, so that a result whose write is
// held back (a slow database, a write tried again) keeps its lease and its
// job is not reclaimed and run again although it succeeded; the PostgreSQL
// listener asks whether it holds cancelled jobs (holdsAny), and shutdown
// counts those whose handlers have not returned (len) and waits for the
// last of them to return (emptied). Its lock guards the set, every
// leaseEnd and settling in it, and settling.
type inflightSet struct {
	mu sync.Mutex
	m  map[attemptRef]*attempt
	// settling counts the attempts of m that are settling.
	settling int
	// emptied is told (without blocking) whenever no attempt of the set
	// is left whose handler has not returned (len is 0).
	emptied chan struct{}
}

// newInflightSet returns an empty set.
func newInflightSet() *inflightSet {
	return &inflightSet{m: map[attemptRef]*attempt{}, emptied: make(chan struct{}, 1)}
}

// add registers a claimed attempt.
func (s *inflightSet) add(a *attempt) {
	s.mu.Lock()
	s.m[a.ref] = a
	s.mu.Unlock()
}

// remove forgets an attempt whose handler returned, or one settling whose
// result was written or given up.
func (s *inflightSet) remove(ref attemptRef) {
	s.mu.Lock()
	s.forget(ref)
	s.mu.Unlock()
}

// forget deletes ref's attempt (s.mu held).
func (s *inflightSet) forget(ref attemptRef) {
	if a, ok := s.m[ref]; ok {
		delete(s.m, ref)
		if a.settling {
			s.settling--
		} else {
			s.toldIfEmptied()
		}
	}
}

// toldIfEmptied tells emptied when no attempt whose handler has not
// returned is left (s.mu held).
func (s *inflightSet) toldIfEmptied() {
	if len(s.m) == s.settling {
		notify(s.emptied)
	}
}

// markSettling marks the attempt of ref, whose handler returned, as
// settling: it stays in the set, its lease renewed while needed
// (toRenew), until its result is written or given up (remove,
// removeSettled). On a success it costs the executor what remove did
// before: one lock.
func (s *inflightSet) markSettling(ref attemptRef) {
	s.mu.Lock()
	if a, ok := s.m[ref]; ok && !a.settling {
		a.settling = true
		s.settling++
		s.toldIfEmptied()
	}
	s.mu.Unlock()
}

// removeSettled forgets the attempts of done, whose completions were
// written, refused or given up: one lock for the batch.
func (s *inflightSet) removeSettled(done []completion) {
	s.mu.Lock()
	for _, d := range done {
		s.forget(d.a.ref)
	}
	s.mu.Unlock()
}

// len is the number of attempts in the set whose handlers have not
// returned (the running ones and those waiting to start).
func (s *inflightSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m) - s.settling
}

// toRenew returns the refs of the attempts whose leases the heartbeater
// renews now: every one whose handler has not returned, and each one
// settling whose lease ends before due. A completion is written within
// milliseconds as a rule, and its row is then not renewed beside it (two
// statements updating the same rows); one held back longer (the database
// slow, its write tried again) is renewed at a heartbeat before its lease
// runs out, when due is at least one heartbeat interval ahead.
func (s *inflightSet) toRenew(due time.Time) []attemptRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := make([]attemptRef, 0, len(s.m))
	for ref, a := range s.m {
		if !a.settling || a.leaseEnd.Before(due) {
			refs = append(refs, ref)
		}
	}
	return refs
}

// holdsAny reports whether an attempt of a job among ids is in the set.
func (s *inflightSet) holdsAny(ids []int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref := range s.m {
		for _, id := range ids {
			if ref.ID == id {
				return true
			}
		}
	}
	return false
}

// leaseEndOf returns the lease end of the attempt of ref, and false when
// the set does not hold it.
func (s *inflightSet) leaseEndOf(ref attemptRef) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[ref]
	if !ok {
		return time.Time{}, false
	}
	return a.leaseEnd, true
}

// written is a's leaseWritten, read under the set's lock (a need not be
// in the set any more).
func (s *inflightSet) written(a *attempt) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return a.leaseWritten
}

// each calls fn, under the set's lock, for each attempt of refs still in
// the set; fn may read and move its leaseEnd and cancel it.
func (s *inflightSet) each(refs []attemptRef, fn func(a *attempt)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range refs {
		if a, ok := s.m[ref]; ok {
			fn(a)
		}
	}
}
