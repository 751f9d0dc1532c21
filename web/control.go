package web

import (
	"context"
	"strings"

	"github.com/jobqueue/jobqueue/queue"
)

// control cancels or deletes jobs, in batches (queue.CancelMany,
// DeleteMany), with a result per id.
func (h *handler) control(ctx context.Context, a Action, ids []int64) ([]idResult, error) {
	var res []queue.IDResult
	var err error
	if a == ActionCancel {
		res, err = h.q.CancelMany(ctx, ids)
	} else {
		res, err = h.q.DeleteMany(ctx, ids)
	}
	if err != nil {
		return nil, err
	}
	out := make([]idResult, 0, len(res))
	for _, r := range res {
		x := idResult{ID: r.ID, OK: r.Err == nil}
		if r.Err != nil {
			x.Error = resultText(r.Err)
		}
		out = append(out, x)
	}
	return out, nil
}

// resultText is the text of an id's error in an action's result: the
// queue's error without its package prefix.
func resultText(err error) string {
	return strings.TrimPrefix(err.Error(), "jobqueue: ")
}
