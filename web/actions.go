package web

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
func (h *handler) retry(ctx context.Context, ids []int64) ([]idResult, error) {
	out := make([]idResult, 0, len(ids))
	for _, id := range ids {
		ok, err := h.q.Retry(ctx, id)
		if errors.Is(err, queue.ErrDuplicate) {
			// An answer about this job (its unique key is taken), not a
			// failure of the database: the other ids are still tried.
			out = append(out, idResult{ID: id, Error: strings.TrimPrefix(err.Error(), "jobqueue: ")})
			continue
		}
		if err != nil {
			return out, err
		}
		res := idResult{ID: id, OK: ok}
		if !ok {
			job, err := h.q.Get(ctx, id)
			switch {
			case errors.Is(err, queue.ErrJobNotFound):
				res.Error = fmt.Sprintf("no job %d", id)
			case err != nil:
				return out, err
			default:
				res.Error = fmt.Sprintf("job %d is %s; only failed or expired jobs can be retried", id, job.Status)
			}
		}
		out = append(out, res)
	}
	return out, nil
}
