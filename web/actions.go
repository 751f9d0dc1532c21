package web

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobqueue/jobqueue/queue"
)

// act runs action a on each id and returns a result per id, in order. An
// error is one of the database (the actions done before it stay done).
func (h *handler) act(ctx context.Context, a Action, ids []int64) ([]idResult, error) {
	switch a {
	case ActionRetry:
		return h.retry(ctx, ids)
	case ActionCancel, ActionDelete:
		return h.control(ctx, a, ids)
	}
	return nil, fmt.Errorf("web: unknown action %q", a)
}

// retry retries each job, explaining each one that could not be retried.
// An id given again gets its first result, as in cancel and delete (a
// second Retry would find the job pending by then).
func (h *handler) retry(ctx context.Context, ids []int64) ([]idResult, error) {
	out := make([]idResult, 0, len(ids))
	decided := make(map[int64]idResult, len(ids))
	for _, id := range ids {
		if res, ok := decided[id]; ok {
			out = append(out, res)
			continue
		}
		res, err := h.retryOne(ctx, id)
		if err != nil {
			return out, err
		}
		decided[id] = res
		out = append(out, res)
	}
	return out, nil
}

// retryOne retries job id; the error is one of the database.
func (h *handler) retryOne(ctx context.Context, id int64) (idResult, error) {
	ok, err := h.q.Retry(ctx, id)
	if errors.Is(err, queue.ErrDuplicate) {
		// An answer about this job (its unique key is taken), not a
		// failure of the database: the other ids are still tried.
		return idResult{ID: id, Error: resultText(err)}, nil
	}
	if err != nil {
		return idResult{}, err
	}
	res := idResult{ID: id, OK: ok}
	if !ok {
		// A missing job gets Get's error, the one that cancel and delete
		// give (resultText).
		job, err := h.q.Get(ctx, id)
		switch {
		case errors.Is(err, queue.ErrJobNotFound):
			res.Error = resultText(err)
		case err != nil:
			return idResult{}, err
		default:
			res.Error = fmt.Sprintf("job %d is %s; only failed or expired jobs can be retried", id, job.Status)
		}
	}
	return res, nil
}
