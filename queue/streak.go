package queue

import "sync/atomic"

// failureStreak follows the runs of failures of a task that is tried again
// and again (the leader election, the WAL checkpoint), so that it logs the
// first failure of a run as a warning and not each one after it. Its zero
// value is ready and it is safe for concurrent use.
type failureStreak struct{ failing atomic.Bool }

// failed records a failure and reports whether it is the first of a run.
func (s *failureStreak) failed() (first bool) { return !s.failing.Swap(true) }

// succeeded records a success and reports whether it ended a run of
// failures.
func (s *failureStreak) succeeded() (ended bool) { return s.failing.Swap(false) }
