package migrations

// The side tables (and SQLite's side view) of a jobs table are named
// <table>_<suffix>, so another program, or another queue, may already have
// a table of that name: internal/schema's CheckSideObjects tells.

import (
	"context"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/schema"
)

// relationKind is what holds the name of t: "table", "view", "other", or
// "" when nothing does.
func relationKind(ctx context.Context, q queryer, t engine.Table) (string, error) {
	return schema.RelationKind(ctx, q, t)
}

// checkSideObjects makes sure that every side table and side view of the
// jobs table t is either missing or really one (schema.CheckSideObjects);
// callers run it before they create or drop anything.
func checkSideObjects(ctx context.Context, q queryer, t engine.Table) error {
	return schema.CheckSideObjects(ctx, q, t)
}
