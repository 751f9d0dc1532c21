package migrations

// The v1 -> v2 migration on MySQL/MariaDB: every DDL statement commits on
// its own, so every step looks at what is already done and is safe to run
// again after an interruption.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// mysqlSteps are the steps of the conversion on MySQL.
func (c *converter) mysqlSteps() []migrateStep {
	return []migrateStep{
		{"add the version 2 columns", c.mysqlAddColumns},
		{"convert the rows", c.mysqlConvertRows},
		{"replace the version 1 indexes", c.replaceIndexes},
		{"drop retry_count and locked_at", c.mysqlFinish},
	}
}

// mysqlSession pins one session for the whole conversion and sets its time
// zone to UTC while created_at turns from TIMESTAMP into DATETIME; release
// restores the time zone and gives the session back, and says what to do
// when the time zone could not be restored.
func mysqlSession(ctx context.Context, ex execQueryer) (session execQueryer, release func() error, err error) {
	session, unpin, err := oneSession(ctx, engine.MySQL, ex)
	if err != nil {
		return nil, nil, err
	}
	restore, err := mysqlUTCSession(ctx, session)
	if err != nil {
		unpin()
		return nil, nil, err
	}
	return session, func() error {
		err := restore()
		unpin()
		return err
	}, nil
}

// mysqlUTCSession sets the session time zone of ex's connection to UTC and
// returns a func that restores the previous one. When that fails (the
// connection broke), a *sql.Conn is discarded so that its pool never hands
// out a session left in UTC, and the error says so; on a *sql.Tx (goose's,
// on a pool of one connection) it says to close the pool's connection.
func mysqlUTCSession(ctx context.Context, ex execQueryer) (restore func() error, err error) {
	var prev string
	rows, err := ex.QueryContext(ctx, "SELECT @@session.time_zone")
	if err != nil {
		return nil, fmt.Errorf("read the session time zone: %w", err)
	}
	for rows.Next() {
		if err := rows.Scan(&prev); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the session time zone: %w", err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the session time zone: %w", err)
	}
	if _, err := ex.ExecContext(ctx, "SET time_zone = '+00:00'"); err != nil {
		return nil, fmt.Errorf("set the session time zone to UTC: %w", err)
	}
	return func() error {
		_, err := ex.ExecContext(context.WithoutCancel(ctx), "SET time_zone = ?", prev)
		if err == nil {
			return nil
		}
		next := "its session may still be in UTC: close the pool's connection (SetMaxIdleConns(0), or open the pool again) before it reads or writes TIMESTAMP columns"
		if conn, ok := ex.(*sql.Conn); ok {
			discardConn(conn)
			next = "the connection was discarded, so no session of the pool is left in UTC"
		}
		return fmt.Errorf("restore the session time zone to %q: %w; %s", prev, err, next)
	}, nil
}

// discardConn closes conn without giving it back to its pool: a Raw that
// answers driver.ErrBadConn makes database/sql close the driver's
// connection, and that ErrBadConn is the whole of Raw's answer.
func discardConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

// mysqlStatus is the version 2 status column on MySQL: ddl's ENUM of the
// statuses, with the binary collation of the rest of the table.
func mysqlStatus() string {
	return ddl.StatusEnum() + " COLLATE utf8mb4_bin NOT NULL DEFAULT 'pending'"
}

// mysqlKeptColumn is the MySQL definition of a column both versions share.
type mysqlKeptColumn struct{ name, def string }

// mysqlKept returns the MySQL definitions of the columns both versions
// share whose type or collation version 2 may define differently from a
// version 1 table (TIMESTAMP times, times with fractional seconds, a
// case-insensitive collation).
func mysqlKept() []mysqlKeptColumn {
	return []mysqlKeptColumn{
		{"name", "VARCHAR(255) COLLATE utf8mb4_bin NOT NULL"},
		{"type", "VARCHAR(64) COLLATE utf8mb4_bin NOT NULL DEFAULT 'default'"},
		{"error", "TEXT COLLATE utf8mb4_bin NULL"},
		{"scheduled_at", "DATETIME NOT NULL"},
		{"expires_at", "DATETIME NULL"},
		{"created_at", "DATETIME NOT NULL"},
	}
}

// mysqlCheckTimeTypes refuses, before the migration changes anything, a
// table whose time column both versions share (scheduled_at, expires_at,
// created_at) is neither a DATETIME nor a TIMESTAMP (with or without
// fractional seconds): the migration would not turn it into version 2's
// DATETIME, and the table would end neither version 1 nor version 2.
func mysqlCheckTimeTypes(t engine.Table, cols map[string]columnInfo) error {
	for _, k := range mysqlKept() {
		ci, ok := cols[k.name]
		if !ok || !strings.HasSuffix(k.name, "_at") {
			continue
		}
		base, _, _ := strings.Cut(ci.Type, "(")
		if base != "datetime" && base != "timestamp" {
			return fmt.Errorf("table %s: column %s is %s, not a time: Migrate converts a DATETIME or TIMESTAMP %s (with or without fractional seconds) into version 2's DATETIME, and nothing else; change the column to a DATETIME holding UTC times, then run Migrate again; nothing was changed",
				t.Name, k.name, strings.ToUpper(ci.Type), k.name)
		}
	}
	return nil
}

// mysqlAddColumns adds the missing version 2 columns as nullable columns
// and the 'expired' status, turns TIMESTAMP times, and times with
// fractional seconds, into UTC DATETIMEs (the session is UTC, so each
// instant is kept, to the second) and gives the string columns
// version 2's binary collation, all in one ALTER TABLE that does only what
// is still to do.
func (c *converter) mysqlAddColumns(ctx context.Context, ex execQueryer) error {
	cols, err := columns(ctx, ex, c.t)
	if err != nil {
		return err
	}
	if err := mysqlCheckTimeTypes(c.t, cols); err != nil {
		return err
	}
	var clauses []string
	if st := cols["status"]; !strings.Contains(st.Type, "'expired'") || (st.Collation != "" && st.Collation != "utf8mb4_bin") {
		clauses = append(clauses, "MODIFY COLUMN status "+mysqlStatus())
	}
	for _, k := range mysqlKept() {
		ci, ok := cols[k.name]
		if !ok {
			continue
		}
		isTime := strings.HasSuffix(k.name, "_at")
		if (isTime && ci.Type != "datetime") || (!isTime && ci.Collation != "" && ci.Collation != "utf8mb4_bin") {
			clauses = append(clauses, "MODIFY COLUMN "+k.name+" "+k.def)
		}
	}
	for _, col := range migratedColumns {
		if _, ok := cols[col.name]; ok {
			continue
		}
		clauses = append(clauses, "ADD COLUMN "+col.name+" "+col.myType+" AFTER "+col.after)
	}
	if len(clauses) == 0 {
		return nil
	}
	// New string columns (and later ones) get the binary collation.
	clauses = append(clauses, "DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	return c.alter(ctx, ex, clauses)
}

// mysqlBatchIDs is how many ids one UPDATE of the MySQL conversion covers.
const mysqlBatchIDs = 50_000

// mysqlConvertRows converts every row not yet converted with one UPDATE per
// range of mysqlBatchIDs ids, each committing as a whole, so that a large
// table never needs one huge transaction; run again after an interruption,
// it converts only the rows still NULL.
func (c *converter) mysqlConvertRows(ctx context.Context, ex execQueryer) error {
	q, args, ok, err := c.rowConversion(ctx, ex)
	if err != nil || !ok {
		return err
	}
	if err := c.mysqlSamePolicy(ctx, ex); err != nil {
		return err
	}
	batch := int64(mysqlBatchIDs)
	if c.o.mysqlBatchIDs > 0 {
		batch = int64(c.o.mysqlBatchIDs)
	}
	q += " AND id >= ? AND id < ?"
	// Each batch starts at the first row still to convert, so that a gap
	// in the ids (old jobs kept, millions since pruned) costs no empty
	// batches: there are at most as many batches as rows.
	for n, from := 1, int64(0); ; n++ {
		next, ok, err := c.mysqlFirstUnconverted(ctx, ex, from)
		if err != nil || !ok {
			return err // nil when every row is converted
		}
		from = next + batch
		if _, err := ex.ExecContext(ctx, q, append(args, next, from)...); err != nil {
			return err
		}
		if c.o.afterBatch != nil {
			if err := c.o.afterBatch(n); err != nil {
				return fmt.Errorf("after batch %d: %w", n, err)
			}
		}
	}
}

// mysqlSamePolicy refuses to resume an interrupted conversion with a
// policy other than the one the rows it converted hold, which would give
// the table's jobs two policies; nothing is refused when no row is left to
// convert.
func (c *converter) mysqlSamePolicy(ctx context.Context, ex execQueryer) error {
	if _, todo, err := c.mysqlFirstUnconverted(ctx, ex, 0); err != nil || !todo {
		return err
	}
	maxAttempts, baseDelay, maxDelay := c.p.internal().Seconds()
	var a, b, d int64
	found, err := queryOne(ctx, ex, []any{&a, &b, &d}, "SELECT max_attempts, base_delay, max_delay FROM "+c.t.Quoted()+
		" WHERE attempts IS NOT NULL AND (max_attempts <> ? OR base_delay <> ? OR max_delay <> ?) LIMIT 1", maxAttempts, baseDelay, maxDelay)
	if err != nil || !found {
		return err
	}
	return fmt.Errorf("the interrupted migration stored the retry policy max attempts %d, base delay %d s, max delay %d s with the jobs it converted; "+
		"give that policy to convert the rest (max attempts %d, base delay %d s, max delay %d s would leave the table's jobs with two policies)",
		a, b, d, maxAttempts, baseDelay, maxDelay)
}

// mysqlFirstUnconverted is the smallest id at or above from of a row not
// yet converted (its attempts is NULL); ok is false when there is none.
func (c *converter) mysqlFirstUnconverted(ctx context.Context, ex execQueryer, from int64) (id int64, ok bool, err error) {
	var first sql.NullInt64
	rows, err := ex.QueryContext(ctx, "SELECT MIN(id) FROM "+c.t.Quoted()+" WHERE attempts IS NULL AND id >= ?", from)
	if err != nil {
		return 0, false, err
	}
	for rows.Next() {
		err = rows.Scan(&first)
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = rows.Err()
	}
	return first.Int64, first.Valid, err
}

// mysqlFinish is finish with MySQL's MODIFY COLUMN definitions.
func (c *converter) mysqlFinish(ctx context.Context, ex execQueryer) error {
	return c.finish(ctx, ex, func(col v2Column, ci columnInfo) []string {
		if col.myFinal == "" || !ci.Nullable {
			return nil
		}
		return []string{"MODIFY COLUMN " + col.name + " " + col.myFinal}
	})
}
