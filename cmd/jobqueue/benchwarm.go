package main

import (
	"context"
	"database/sql"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// warmPool warms workerConns connections of db on table (engine.WarmPool),
// as many as a worker keeps idle (app.open). Without it, each worker
// process of bench --processes opened its connections once the drain had
// started (PostgreSQL, 4 processes of 16: 13 backends started during the
// drain, against 2 for one process of 64), in the time it measures and on
// the cores the drain shares.
func warmPool(ctx context.Context, db *sql.DB, k engine.Kind, table string) error {
	return engine.WarmPool(ctx, db, k, table, workerConns)
}
