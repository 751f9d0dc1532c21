package queue

import (
	"context"
	"sync"
	"time"
)

// attempt is one claimed job on its way through the worker: the claimer
// makes it, an executor runs it, and the heartbeater renews its lease
// while it is in the run's inflightSet.
type attempt struct {
	row    *JobRow
	ref    attemptRef
	ctx    context.Context
	cancel context.CancelCauseFunc
	// leaseEnd is when the attempt's lease ends at the latest, as far as
	// the worker knows (guarded by inflightSet.mu): the claim's
	// lease_until, then the end each heartbeat that renewed it wrote.
	leaseEnd time.Time
}

// inflightSet is the register of one run's claimed attempts whose handlers
// have not returned. The claimer adds to it, the executor that ran an
// attempt removes it, the heartbeater reads it and moves leaseEnd, the
// PostgreSQL listener asks whether it holds cancelled jobs (holdsAny), and
// shutdown counts it. Its lock guards the set and every leaseEnd in it.
type inflightSet struct {
	mu sync.Mutex
	m  map[attemptRef]*attempt
}

// newInflightSet returns an empty set.
func newInflightSet() *inflightSet {
	return &inflightSet{m: map[attemptRef]*attempt{}}
}

// add registers a claimed attempt.
func (s *inflightSet) add(a *attempt) {
	s.mu.Lock()
	s.m[a.ref] = a
	s.mu.Unlock()
}

// remove forgets an attempt whose handler returned.
func (s *inflightSet) remove(ref attemptRef) {
	s.mu.Lock()
	delete(s.m, ref)
	s.mu.Unlock()
}

// len is the number of attempts in the set.
func (s *inflightSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// refs returns the refs of every attempt in the set.
func (s *inflightSet) refs() []attemptRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := make([]attemptRef, 0, len(s.m))
	for ref := range s.m {
		refs = append(refs, ref)
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
