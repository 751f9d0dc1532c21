package queue

import (
	"context"
	"errors"
	"fmt"
)

// RetryMany is Retry for many ids, each in a transaction of its own, and
// returns a result per id, in the order given, as CancelMany does (an id
// given twice gets the same result twice). A result's Err is nil when the job was retried, else it wraps
// ErrNotRetryable (naming the job's status), ErrJobNotFound, or
// ErrDuplicate (its unique key is held by another live job: retry it once
// that one has finished), and says what to do. The error is non-nil only
// when the database failed, the results then covering the ids before it
// (the jobs retried before it stay retried), or when an id is not
// positive: it then wraps ErrInvalidID, names the id, and no job was
// retried.
func (q *Queue) RetryMany(ctx context.Context, ids []int64) ([]IDResult, error) {
	if err := checkIDs("retry many", ids); err != nil {
		return nil, err
	}
	out := make([]IDResult, 0, len(ids))
	decided := make(map[int64]error, len(ids))
	for _, id := range ids {
		err, known := decided[id]
		if !known {
			var dbErr error
			if err, dbErr = q.retryResult(ctx, id); dbErr != nil {
				return out, dbErr
			}
			decided[id] = err
		}
		out = append(out, IDResult{ID: id, Err: err})
	}
	return out, nil
}

// retryResult retries job id and returns its result (nil: retried), or
// dbErr when the database failed.
func (q *Queue) retryResult(ctx context.Context, id int64) (result, dbErr error) {
	ok, err := q.Retry(ctx, id)
	switch {
	case errors.Is(err, ErrDuplicate):
		return err, nil
	case err != nil:
		return nil, err
	case ok:
		return nil, nil
	}
	// Not retried: say why, with Get's error for a missing job (the one
	// Cancel and Delete give).
	job, err := q.Get(ctx, id)
	switch {
	case errors.Is(err, ErrJobNotFound):
		return err, nil
	case err != nil:
		return nil, err
	}
	return fmt.Errorf("%w: job %d is %s and was left unchanged; only failed or expired jobs can be retried", ErrNotRetryable, id, job.Status), nil
}
