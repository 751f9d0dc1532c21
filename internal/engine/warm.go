package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// WarmPool opens conns connections of db at once, reads table on each (a
// PostgreSQL backend loads the table's and its indexes' catalog entries at
// its first statement on them) and keeps them idle in the pool, raising
// db's SetMaxIdleConns to conns. A benchmark calls it before the clock
// starts, so that the server sessions of its workers are not started in
// the time it measures. SQLite, which has no server session to start, is
// left as it is. A table that is not there is an error that names it.
func WarmPool(ctx context.Context, db *sql.DB, k Kind, table string, conns int) error {
	if k == SQLite {
		return nil
	}
	t, err := ParseTable(k, table)
	if err != nil {
		return err
	}
	db.SetMaxIdleConns(conns)
	held := make([]*sql.Conn, 0, conns)
	defer func() {
		for _, c := range held {
			c.Close() // back to the pool, idle
		}
	}()
	for range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("open the workers' connections: %w", err)
		}
		held = append(held, c)
	}
	for _, c := range held {
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
