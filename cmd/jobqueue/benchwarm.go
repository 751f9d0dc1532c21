package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// warmPool opens workerConns connections of db at once, reads the table
// on each (a PostgreSQL backend loads the table's and its indexes'
// catalog entries at its first statement on them) and keeps them idle in
// the pool. Without it, each worker process of bench --processes opened
// its connections once the drain had started (PostgreSQL, 4 processes of
// 16: 13 backends started during the drain, against 2 for one process of
// 64), in the time it measures and on the cores the drain shares. SQLite,
// which has no server to start, is left as it is.
func warmPool(ctx context.Context, db *sql.DB, k engine.Kind, table string) error {
	if k == engine.SQLite {
		return nil
	}
	t, err := engine.ParseTable(k, table)
	if err != nil {
		return err
	}
	db.SetMaxIdleConns(workerConns) // as app.open does; the pool may be another's
	conns := make([]*sql.Conn, 0, workerConns)
	defer func() {
		for _, c := range conns {
			c.Close() // back to the pool, idle
		}
	}()
	for range workerConns {
		c, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("open the workers' connections: %w", err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		rows, err := c.QueryContext(ctx, "SELECT id FROM "+t.Quoted()+" WHERE id = 0")
		if err != nil {
			return fmt.Errorf("read %s on the workers' connections: %w", table, err)
		}
		if err := errors.Join(rows.Close(), rows.Err()); err != nil {
			return err
		}
	}
	return nil
}
