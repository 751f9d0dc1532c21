package queue

// The runs of a queue's workers in this process hear the jobs its Cancel
// calls end, so that a handler of one of them stops at once (the run's
// heartbeater checks its leases now), on every engine, as PostgreSQL's
// notification does for workers that LISTEN. Workers of other processes
// find out at their next heartbeat (at once on PostgreSQL).

import "sync"

// localRuns is a queue's register of its running workers' runs, each by
// the function that tells it of cancelled jobs. Its zero value is ready
// and it is safe for concurrent use.
type localRuns struct {
	mu   sync.Mutex
	next int
	m    map[int]func(ids []int64)
}

// add registers tell, which must not block, and returns the function that
// takes it off again.
func (l *localRuns) add(tell func(ids []int64)) (remove func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[int]func([]int64){}
	}
	k := l.next
	l.next++
	l.m[k] = tell
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.m, k)
	}
}

// cancelled tells every registered run that the jobs ids were cancelled.
func (l *localRuns) cancelled(ids []int64) {
	l.mu.Lock()
	tells := make([]func([]int64), 0, len(l.m))
	for _, tell := range l.m {
		tells = append(tells, tell)
	}
	l.mu.Unlock()
	for _, tell := range tells {
		tell(ids)
	}
}
