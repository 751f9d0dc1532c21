package web

import (
	"context"
	"fmt"
)

// control cancels or deletes jobs (waiting for the queue's Cancel/Delete).
func (h *handler) control(ctx context.Context, a Action, ids []int64) ([]idResult, error) {
	out := make([]idResult, 0, len(ids))
	for _, id := range ids {
		out = append(out, idResult{ID: id, Error: fmt.Sprintf("%s is not available yet", a)})
	}
	return out, nil
}
