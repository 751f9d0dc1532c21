package queue

import "fmt"

// jobNotFound is the one error of every operation that finds no job id in
// the table: Get, Cancel, Delete (and their many-id forms), and so the
// command line and the dashboard, which report a Retry that found no job
// with Get's error. It wraps ErrJobNotFound and says what to check.
func (q *Queue) jobNotFound(id int64) error {
	return fmt.Errorf("%w: no job %d in table %q (never enqueued there, or deleted or pruned since); check the id and the table", ErrJobNotFound, id, q.table.Name)
}
