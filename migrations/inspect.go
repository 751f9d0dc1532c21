package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// queryer is what the catalog readers need: both *sql.DB and *sql.Tx have
// it, so a migration can inspect the table inside its own transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// tableState is what inspect finds under a table name.
type tableState int

const (
	// tableMissing: no table of that name (in the current schema or
	// database).
	tableMissing tableState = iota
	// tableV1: the version 1 layout of SPEC section 4 (retry_count and
	// locked_at, none of the version 2 columns); Migrate converts it.
	tableV1
	// tablePartial: a table whose v1 → v2 migration was interrupted: some
	// version 2 columns present, or retry_count/locked_at still there
	// alongside them, or (MySQL) a status ENUM without 'expired' or a
	// created_at still TIMESTAMP. Migrate completes it.
	tablePartial
	// tableV2: every version 2 column, no version 1 leftovers.
	tableV2
	// tableForeign: a table that has none of the columns that tell jobqueue
	// versions apart, or lacks one of the columns both versions have; it is
	// not ours, and neither Install nor Migrate may touch it.
	tableForeign
)

// String names the state for error messages and test failures.
func (s tableState) String() string {
	switch s {
	case tableMissing:
		return "missing"
	case tableV1:
		return "version 1"
	case tablePartial:
		return "partly migrated"
	case tableV2:
		return "version 2"
	case tableForeign:
		return "not a jobqueue table"
	}
	return fmt.Sprintf("tableState(%d)", int(s))
}

// The columns that tell the versions apart (SPEC sections 2 and 4); the
// columns both versions share (id, name, type, payload, status, error,
// scheduled_at, expires_at, created_at) are in commonColumns.
var (
	v1OnlyColumns = []string{"retry_count", "locked_at"}
	v2OnlyColumns = []string{"attempts", "claim_token", "lease_until", "max_attempts", "base_delay", "max_delay", "finished_at"}
	commonColumns = []string{"id", "name", "type", "payload", "status", "error", "scheduled_at", "expires_at", "created_at"}
)

// inspect reads the catalog of db and tells what t is: missing, version 1,
// partly migrated, version 2, or a table that is not ours. It changes
// nothing. q is a *sql.DB or a *sql.Tx of the engine t.Kind.
func inspect(ctx context.Context, q queryer, t engine.Table) (tableState, error) {
	cols, err := columns(ctx, q, t)
	if err != nil {
		return 0, err
	}
	if len(cols) == 0 {
		return tableMissing, nil
	}
	return classify(t.Kind, cols), nil
}

// classify is inspect's rule on the columns of an existing table.
func classify(k engine.Kind, cols map[string]columnInfo) tableState {
	has := func(names []string) (n int) {
		for _, c := range names {
			if _, ok := cols[c]; ok {
				n++
			}
		}
		return n
	}
	v1, v2, common := has(v1OnlyColumns), has(v2OnlyColumns), has(commonColumns)
	switch {
	case v1 == 0 && v2 == 0, common < len(commonColumns):
		// Neither version, or a column both versions have (and no step of
		// a migration drops) is missing: another program's table that
		// shares a column name or two (an attempts column, say).
		return tableForeign
	case v2 == 0 && v1 == len(v1OnlyColumns) && common == len(commonColumns):
		return tableV1
	case v1 == 0 && v2 == len(v2OnlyColumns) && common == len(commonColumns):
		if k == engine.MySQL {
			// The last steps of a MySQL migration: the expired status and
			// created_at as a UTC DATETIME.
			if !strings.Contains(cols["status"].Type, "'expired'") || cols["created_at"].Type != "datetime" {
				return tablePartial
			}
		}
		return tableV2
	default:
		return tablePartial
	}
}

// columnInfo is one column as the engine's catalog describes it.
type columnInfo struct {
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

// columns reads the columns of t from the catalog, keyed by name. A missing
// table has none (an empty map and no error).
func columns(ctx context.Context, q queryer, t engine.Table) (map[string]columnInfo, error) {
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
	cols := map[string]columnInfo{}
	for rows.Next() {
		var c columnInfo
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

// indexInfo is one index of a table as the engine's catalog describes it.
type indexInfo struct {
	// Name is the index name.
	Name string
	// Columns are the indexed columns in order; a descending column is
	// "col DESC", a MySQL prefix "col(10)" and an expression "(expr)"
	// (or "(expression)" where the catalog does not show it).
	Columns []string
	// Unique is true for unique indexes (the primary key included).
	Unique bool
	// Primary is true for the primary key's index.
	Primary bool
	// Partial is true for an index with a WHERE clause (PostgreSQL, SQLite).
	Partial bool
}

// sameAs reports whether the index is a plain, non-unique index on exactly
// cols, which is how all four of ours are defined.
func (ix indexInfo) sameAs(cols []string) bool {
	return !ix.Unique && !ix.Primary && !ix.Partial && slices.Equal(ix.Columns, cols)
}

// indexes reads the indexes of t from the catalog, keyed by name: pg_index
// on PostgreSQL (current schema), information_schema.STATISTICS on MySQL
// (current database), pragma index_list and index_xinfo on SQLite. The
// primary key is included where the engine keeps an index for it
// (PostgreSQL "<table>_pkey", MySQL "PRIMARY"; SQLite's INTEGER PRIMARY KEY
// has none).
func indexes(ctx context.Context, q queryer, t engine.Table) (map[string]indexInfo, error) {
	var query string
	switch t.Kind {
	case engine.Postgres:
		query = `SELECT i.relname, ix.indisunique, ix.indisprimary, ix.indpred IS NOT NULL,
       COALESCE(a.attname::text, '(' || pg_get_indexdef(ix.indexrelid, k.ord::int, true) || ')')
         || CASE WHEN ix.indoption[(k.ord - 1)::int] & 1 = 1 THEN ' DESC' ELSE '' END
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_index ix ON ix.indrelid = c.oid
JOIN pg_class i ON i.oid = ix.indexrelid
CROSS JOIN LATERAL unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum AND k.attnum > 0
WHERE n.nspname = current_schema() AND c.relname = $1 AND k.ord <= ix.indnkeyatts
ORDER BY i.relname, k.ord`
	case engine.MySQL:
		// MariaDB has no EXPRESSION column, MySQL 8 has no way to tell a
		// functional part other than a NULL COLUMN_NAME: "(expression)".
		query = "SELECT INDEX_NAME, NON_UNIQUE = 0, INDEX_NAME = 'PRIMARY', FALSE," +
			" CONCAT(COALESCE(COLUMN_NAME, '(expression)')," +
			"  CASE WHEN SUB_PART IS NULL THEN '' ELSE CONCAT('(', SUB_PART, ')') END," +
			"  CASE WHEN COLLATION = 'D' THEN ' DESC' ELSE '' END)" +
			" FROM information_schema.STATISTICS" +
			" WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?" +
			" ORDER BY INDEX_NAME, SEQ_IN_INDEX"
	case engine.SQLite:
		query = `SELECT il.name, il."unique", il.origin = 'pk', il.partial,
       COALESCE(ii.name, '(expression)') || CASE WHEN ii."desc" THEN ' DESC' ELSE '' END
FROM pragma_index_list(?) AS il
JOIN pragma_index_xinfo(il.name) AS ii
WHERE ii.key
ORDER BY il.name, ii.seqno`
	default:
		return nil, fmt.Errorf("%w: engine %q", engine.ErrUnsupportedDatabase, t.Kind)
	}
	rows, err := q.QueryContext(ctx, query, t.Name)
	if err != nil {
		return nil, fmt.Errorf("read the indexes of table %s: %w", t.Name, err)
	}
	defer rows.Close()
	idx := map[string]indexInfo{}
	for rows.Next() {
		var name, col string
		var unique, primary, partial bool
		if err := rows.Scan(&name, &unique, &primary, &partial, &col); err != nil {
			return nil, fmt.Errorf("read the indexes of table %s: %w", t.Name, err)
		}
		ix := idx[name]
		ix.Name, ix.Unique, ix.Primary, ix.Partial = name, unique, primary, partial
		ix.Columns = append(ix.Columns, col)
		idx[name] = ix
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the indexes of table %s: %w", t.Name, err)
	}
	return idx, nil
}
