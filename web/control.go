package web

import (
	"context"
	"fmt"
	"strings"

	"github.com/jobqueue/jobqueue/queue"
)

// act runs action a (retry, cancel or delete) on the jobs ids, through the
// queue's bulk form (queue.RetryMany, CancelMany, DeleteMany), and returns
// a result per id, in order. An error is one of the database: the results
// then cover the ids done before it, which stay done.
func (h *handler) act(ctx context.Context, a Action, ids []int64) ([]idResult, error) {
	var op func(context.Context, []int64) ([]queue.IDResult, error)
	switch a {
	case ActionRetry:
		op = h.q.RetryMany
	case ActionCancel:
		op = h.q.CancelMany
	case ActionDelete:
		op = h.q.DeleteMany
	default:
		return nil, fmt.Errorf("web: unknown action %q", a)
	}
	res, err := op(ctx, ids)
	out := make([]idResult, 0, len(res))
	for _, r := range res {
		x := idResult{ID: r.ID, OK: r.Err == nil}
		if r.Err != nil {
			x.Error = resultText(r.Err)
		}
		out = append(out, x)
	}
	return out, err
}

// resultText is the text of an id's error in an action's result: the
// queue's error without its package prefix.
func resultText(err error) string {
	return strings.TrimPrefix(err.Error(), "jobqueue: ")
}
