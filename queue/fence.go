package queue

import "context"

// A fence stops the statements sent under a context once the leadership
// they act for may have run out (leader.go): every generated statement
// asks it right before it is handed to database/sql (dbtx.go), so that a
// worker paused in the middle of its maintenance or of a tick's enqueue
// sends nothing more as leader once it resumes, whichever statement it was
// about to send (the bounded batches of ExpireOverdue and Prune, Reclaim's
// rounds, the statements of a keyed enqueue).

// fenceKey is the context key of a fence.
type fenceKey struct{}

// withFence returns ctx with a fence: guard returns an error once the
// statements must stop.
func withFence(ctx context.Context, guard func() error) context.Context {
	return context.WithValue(ctx, fenceKey{}, guard)
}

// fenced returns the fence's error when ctx has a fence that is closed.
func fenced(ctx context.Context) error {
	if guard, ok := ctx.Value(fenceKey{}).(func() error); ok {
		return guard()
	}
	return nil
}
