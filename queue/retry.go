package queue

import (
	"context"
	"time"
)

// retryWrite is what decideRetry decided for a job: the values its row
// gets besides those every retry writes (pending, attempts 0, error,
// finished_at, claim token and lease cleared, scheduled_at now). The write
// is fenced by from, the status the decision read.
type retryWrite struct {
	from      Status
	expiresAt *time.Time // the deadline the job keeps; nil clears it
}

// decideRetry is the one rule of Retry (SPEC section 3) for a job read
// with status st and deadline expiresAt, retried at now:
//   - only a failed or expired job is retried (ok false otherwise, a
//     missing job included: st "");
//   - an expired job loses its deadline, and so does a failed one whose
//     deadline has passed by now (else it would expire at once again);
//   - a failed job whose deadline is still ahead keeps it.
func decideRetry(st Status, expiresAt *time.Time, now time.Time) (w retryWrite, ok bool) {
	switch st {
	case StatusFailed, StatusExpired:
	default:
		return retryWrite{}, false
	}
	w.from = st
	if st == StatusFailed && expiresAt != nil && expiresAt.After(now) {
		w.expiresAt = expiresAt
	}
	return w, true
}

// retryOn retries job id on d, a transaction: it reads the job locked,
// decides with decideRetry and writes the decision fenced by the status it
// read. False when the job is missing or not failed or expired.
func (q *Queue) retryOn(ctx context.Context, d dbtx, id int64, now time.Time) (bool, error) {
	st, expiresAt, found, err := q.st.retryCandidate(ctx, d, id)
	if err != nil || !found {
		return false, err
	}
	w, ok := decideRetry(st, expiresAt, now)
	if !ok {
		return false, nil
	}
	return q.st.retryIn(ctx, d, id, w, now)
}

// retryPlain is Retry on a table without unique keys, in one transaction.
func (q *Queue) retryPlain(ctx context.Context, id int64, now time.Time) (bool, error) {
	var ok bool
	err := q.inOwnTx(ctx, func(d dbtx) error {
		var err error
		ok, err = q.retryOn(ctx, d, id, now)
		return err
	})
	return ok, err
}
