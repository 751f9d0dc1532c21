// Package schema reads a jobs table's columns from the engine's catalog and
// tells which version of the layout it has (missing, version 1, half
// migrated, version 2, or not a jobqueue table). The migrations use it to
// decide what to do, and the queue to refuse a table it cannot run on.
package schema

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// Queryer is what the catalog readers need: both *sql.DB and *sql.Tx have
// it, so a migration can inspect the table inside its own transaction.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// State is what Inspect finds under a table name.
type State int

const (
	// Missing: no table of that name (in the current schema or
	// database).
	Missing State = iota
	// V1: the version 1 layout of SPEC section 4 (retry_count and
	// locked_at, none of the version 2 columns); Migrate converts it.
	V1
	// Partial: a table whose v1 → v2 migration was interrupted: some
	// version 2 columns present, or retry_count/locked_at still there
	// alongside them, or (MySQL) a status ENUM without 'expired' or a
	// created_at still TIMESTAMP. Migrate completes it.
	Partial
	// V2: every version 2 column, no version 1 leftovers.
	V2
	// Foreign: a table that has none of the columns that tell jobqueue
	// versions apart, or lacks one of the columns both versions have; it is
	// not ours, and neither Install nor Migrate may touch it.
	Foreign
)

// String names the state for error messages and test failures.
func (s State) String() string {
	switch s {
	case Missing:
		return "missing"
	case V1:
		return "version 1"
	case Partial:
		return "partly migrated"
	case V2:
		return "version 2"
	case Foreign:
		return "not a jobqueue table"
	}
	return fmt.Sprintf("schema.State(%d)", int(s))
}

// The columns that tell the versions apart (SPEC sections 2 and 4); the
// columns both versions share (id, name, type, payload, status, error,
// scheduled_at, expires_at, created_at) are in CommonColumns.
var (
	V1OnlyColumns = []string{"retry_count", "locked_at"}
	V2OnlyColumns = []string{"attempts", "claim_token", "lease_until", "max_attempts", "base_delay", "max_delay", "finished_at"}
	CommonColumns = []string{"id", "name", "type", "payload", "status", "error", "scheduled_at", "expires_at", "created_at"}
)

// Inspect reads the catalog of db and tells what t is: missing, version 1,
// partly migrated, version 2, or a table that is not ours. It changes
// nothing. q is a *sql.DB or a *sql.Tx of the engine t.Kind.
func Inspect(ctx context.Context, q Queryer, t engine.Table) (State, error) {
	cols, err := Columns(ctx, q, t)
	if err != nil {
		return 0, err
	}
	if len(cols) == 0 {
		return Missing, nil
	}
	return Classify(t.Kind, cols), nil
}

// Classify is Inspect's rule on the columns of an existing table.
func Classify(k engine.Kind, cols map[string]Column) State {
	has := func(names []string) (n int) {
		for _, c := range names {
			if _, ok := cols[c]; ok {
				n++
			}
		}
		return n
	}
	v1, v2, common := has(V1OnlyColumns), has(V2OnlyColumns), has(CommonColumns)
	switch {
	case v1 == 0 && v2 == 0, common < len(CommonColumns):
		// Neither version, or a column both versions have (and no step of
		// a migration drops) is missing: another program's table that
		// shares a column name or two (an attempts column, say).
		return Foreign
	case v2 == 0 && v1 == len(V1OnlyColumns) && common == len(CommonColumns):
		return V1
	case v1 == 0 && v2 == len(V2OnlyColumns) && common == len(CommonColumns):
		if k == engine.MySQL {
			// The last steps of a MySQL migration: the expired status and
			// created_at as a UTC DATETIME.
			if !strings.Contains(cols["status"].Type, "'expired'") || cols["created_at"].Type != "datetime" {
				return Partial
			}
		}
		return V2
	default:
		return Partial
	}
}

// Column is one column as the engine's catalog describes it.
type Column struct {
	// Name is the column name.
	Name string
	// Type is the column type in lower case as the catalog spells it:
	// PostgreSQL's information_schema data_type with its length
	// ("character varying(255)", "timestamp without time zone", "jsonb");
	// MySQL's COLUMN_TYPE without integer display widths, so that MySQL 8
	// and MariaDB agree ("bigint unsigned", "enum('pending',…)"; MariaDB
	// reports JSON as "longtext"); SQLite's declared type ("varchar(255)").
	Type string
	// Nullable is false for NOT NULL columns (and SQLite's INTEGER PRIMARY
	// KEY).
	Nullable bool
	// Default is the column default as the catalog shows it, "" for none.
	// MySQL/MariaDB string literals are unquoted ('default' → default) and
	// MariaDB's NULL default is "", so both servers read alike; PostgreSQL
	// keeps its casts ('default'::character varying) and SQLite its quotes.
	Default string
	// Extra is MySQL's EXTRA ("auto_increment"), "primary key" for
	// SQLite's primary key column, "" otherwise.
	Extra string
	// Collation is the column's collation on MySQL (string columns), ""
	// elsewhere.
	Collation string
}

// displayWidthRE matches MySQL's integer display widths, which MariaDB and
// MySQL before 8.0.19 show (bigint(20) unsigned) and MySQL 8.0.19+ does not.
var displayWidthRE = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|bigint)\(\d+\)`)

// Columns reads the columns of t from the catalog, keyed by name. A missing
// table has none (an empty map and no error).
func Columns(ctx context.Context, q Queryer, t engine.Table) (map[string]Column, error) {
	var query string
	var args []any
	switch t.Kind {
	case engine.Postgres:
		query = `SELECT column_name,
       CASE WHEN character_maximum_length IS NULL THEN data_type
            ELSE data_type || '(' || character_maximum_length || ')' END,
       is_nullable = 'YES', COALESCE(column_default, ''), '', ''
FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = $1
ORDER BY ordinal_position`
		args = []any{t.Name}
	case engine.MySQL:
		query = `SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE = 'YES',
       COALESCE(COLUMN_DEFAULT, ''), EXTRA, COALESCE(COLLATION_NAME, '')
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?
ORDER BY ORDINAL_POSITION`
		args = []any{t.Name}
	case engine.SQLite:
		query = `SELECT name, type, "notnull" = 0 AND pk = 0, COALESCE(dflt_value, ''),
       CASE WHEN pk > 0 THEN 'primary key' ELSE '' END, ''
FROM pragma_table_info(?)
ORDER BY cid`
		args = []any{t.Name}
	default:
		return nil, fmt.Errorf("%w: engine %q", engine.ErrUnsupportedDatabase, t.Kind)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the columns of table %s: %w", t.Name, err)
	}
	defer rows.Close()
	cols := map[string]Column{}
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type, &c.Nullable, &c.Default, &c.Extra, &c.Collation); err != nil {
			return nil, fmt.Errorf("read the columns of table %s: %w", t.Name, err)
		}
		c.Type = strings.ToLower(c.Type)
		if t.Kind == engine.MySQL {
			c.Type = displayWidthRE.ReplaceAllString(c.Type, "$1")
			c.Extra = strings.ToLower(c.Extra)
			switch {
			case c.Default == "NULL" && c.Nullable:
				c.Default = "" // MariaDB's way of saying "no default"
			case len(c.Default) >= 2 && c.Default[0] == '\'' && c.Default[len(c.Default)-1] == '\'':
				c.Default = strings.ReplaceAll(c.Default[1:len(c.Default)-1], "''", "'")
			}
		}
		cols[strings.ToLower(c.Name)] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the columns of table %s: %w", t.Name, err)
	}
	return cols, nil
}
