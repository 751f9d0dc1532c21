package queue

import (
	"sync"
	"time"
)

// failureStreak follows the runs of failures of a task that is tried again
// and again (a claim, a lease renewal, the maintenance, a periodic tick,
// the leader election, the WAL checkpoint, a write kept through an
// outage), so that the task logs the first failure of a run and the
// success that ends it, and not each failure between. Its zero value is
// ready and it is safe for concurrent use.
type failureStreak struct {
	mu       sync.Mutex
	failures int       // of the run going on; 0: none
	since    time.Time // when its first failure was recorded
}

// failed records a failure and reports whether it is the first of a run.
func (s *failureStreak) failed() (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	if s.failures == 1 {
		s.since = time.Now()
	}
	return s.failures == 1
}

// count is how many failures the run going on has had (0: none).
func (s *failureStreak) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures
}

// succeeded records a success and returns the run of failures it ended:
// how many failures it had (0: none was going on) and how long it lasted
// from its first failure.
func (s *failureStreak) succeeded() (failures int, lasted time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	failures, s.failures = s.failures, 0
	if failures == 0 {
		return 0, 0
	}
	return failures, time.Since(s.since)
}

// failureStreaks are the failureStreaks of several tasks of one owner,
// by name (each maintenance operation, each periodic job). Its zero value
// is ready; only one goroutine may use it.
type failureStreaks map[string]*failureStreak

// of returns the streak of the task name, made at its first use.
func (m *failureStreaks) of(name string) *failureStreak {
	if *m == nil {
		*m = failureStreaks{}
	}
	s := (*m)[name]
	if s == nil {
		s = &failureStreak{}
		(*m)[name] = s
	}
	return s
}
