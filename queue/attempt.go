package queue

import (
	"context"
	"errors"
	"time"
)

// AttemptRef names one attempt: the job and the token of the attempt.
type AttemptRef struct {
	ID    int64
	Token string
}

var errNotImplemented = errors.New("jobqueue: not implemented yet")

// claim takes up to max pending, due, unexpired jobs of the given types (every
// type when types is empty), in (scheduled_at, id) order, skipping rows other
// claims hold, and marks them in_progress with attempts+1, a fresh
// claim_token and lease_until = now + lease.
func (q *Queue) claim(ctx context.Context, types []string, max int, lease time.Duration) ([]*JobRow, error) {
	return nil, errNotImplemented
}

// heartbeat extends the leases of running attempts to now + lease; it
// returns the refs that no longer hold their job (lease lost).
func (q *Queue) heartbeat(ctx context.Context, refs []AttemptRef, lease time.Duration) (lost []AttemptRef, err error) {
	return nil, errNotImplemented
}

// complete finishes attempts as completed (or deletes the rows when the queue
// deletes on success), fenced by token; it returns the refs that no longer
// held their job (stale; nothing changed for them).
func (q *Queue) complete(ctx context.Context, refs []AttemptRef) (stale []AttemptRef, err error) {
	return nil, errNotImplemented
}

// fail records a failed attempt of job, fenced by job.ID and job.ClaimToken,
// and applies SPEC section 3's rule. It returns the new status and, for
// pending, the next scheduled_at; ErrLeaseLost when the attempt was stale.
func (q *Queue) fail(ctx context.Context, job *JobRow, handlerErr error) (Status, time.Time, error) {
	return "", time.Time{}, errNotImplemented
}
