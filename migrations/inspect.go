package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/schema"
)

// The table's columns and version are read by internal/schema, which the
// queue uses too; these names keep the migrations' code short.
type (
	queryer    = schema.Queryer
	tableState = schema.State
	columnInfo = schema.Column
)

const (
	tableMissing = schema.Missing
	tableV1      = schema.V1
	tablePartial = schema.Partial
	tableV2      = schema.V2
	tableForeign = schema.Foreign
)

var (
	v1OnlyColumns = schema.V1OnlyColumns
	v2OnlyColumns = schema.V2OnlyColumns
	commonColumns = schema.CommonColumns
)

// inspect tells what t is (see schema.Inspect).
func inspect(ctx context.Context, q queryer, t engine.Table) (tableState, error) {
	return schema.Inspect(ctx, q, t)
}

// columns reads the columns of t (see schema.Columns).
func columns(ctx context.Context, q queryer, t engine.Table) (map[string]columnInfo, error) {
	return schema.Columns(ctx, q, t)
}

// indexInfo is one index of a table as the engine's catalog describes it.
type indexInfo struct {
	// Name is the index name.
	Name string
	// Columns are the indexed columns in order; a descending column is
	// "col DESC", a MySQL prefix "col(10)" and an expression "(expr)"
	// (or "(expression)" where the catalog does not show it). On
	// PostgreSQL a column whose NULLs sort apart from its direction's
	// default is "col NULLS FIRST" or "col DESC NULLS LAST", and the
	// columns of an INCLUDE list follow the key's as "INCLUDE col".
	Columns []string
	// Unique is true for unique indexes (the primary key included).
	Unique bool
	// Primary is true for the primary key's index.
	Primary bool
	// Partial is true for an index with a WHERE clause (PostgreSQL, SQLite).
	Partial bool
	// NullsNotDistinct is true for a PostgreSQL (15+) unique index whose
	// NULLs collide (NULLS NOT DISTINCT).
	NullsNotDistinct bool
	// Method is the index's access method in lower case: PostgreSQL's
	// ("btree", "hash", "brin", …), MySQL's INDEX_TYPE ("btree",
	// "fulltext", …); "btree" on SQLite, which has no other.
	Method string
	// Invalid is true for an index the planner never uses: on PostgreSQL
	// one that is not valid or not ready (left by a CREATE INDEX
	// CONCURRENTLY that failed), on MySQL an invisible one (MariaDB:
	// ignored).
	Invalid bool
	// Unhide, for a MySQL index the optimizer does not use (Invalid), is
	// the ALTER TABLE clause that makes it used again: ALTER INDEX …
	// VISIBLE on MySQL 8, NOT IGNORED on MariaDB (which keeps the flag
	// through a DROP INDEX and ADD INDEX of the same name in one ALTER).
	Unhide string
}

// sameAs reports whether the index is a plain, valid, non-unique B-tree
// index on exactly cols (with the columns' own collation and operator
// class), which is how all four of ours are defined.
func (ix indexInfo) sameAs(cols []string) bool { return ix.matches(cols, false) }

// matches reports whether the index is a plain, valid B-tree index on
// exactly cols, unique when unique is (and not the primary key).
func (ix indexInfo) matches(cols []string, unique bool) bool {
	return ix.Unique == unique && !ix.Primary && !ix.Partial && !ix.NullsNotDistinct && ix.Method == "btree" && !ix.Invalid && slices.Equal(ix.Columns, cols)
}

// indexKey is the key of index name in the map indexes returns: the name,
// in lower case on SQLite and MySQL, whose index names ignore case (the
// catalog keeps idx_Jobs_… where the table was installed as Jobs, t may be
// jobs; on MySQL an index IDX_LEASE_UNTIL holds the name idx_lease_until).
func indexKey(t engine.Table, name string) string {
	if t.Kind == engine.SQLite || t.Kind == engine.MySQL {
		return strings.ToLower(name)
	}
	return name
}

// indexes reads the indexes of t from the catalog, keyed by indexKey: pg_index
// on PostgreSQL (current schema), information_schema.STATISTICS on MySQL
// (current database), pragma index_list and index_xinfo on SQLite. A
// column indexed with another collation than its own (PostgreSQL; on
// SQLite, where our columns declare none, another than BINARY) or a
// PostgreSQL operator class that is not its type's default reads
// "col COLLATE name" or "col opclass", so that it is not the column; so
// does a PostgreSQL column in another order or NULLs placement than the
// default ("col DESC", "col NULLS FIRST"), and an INCLUDE list adds
// "INCLUDE col" entries. The
// primary key is included where the engine keeps an index for it
// (PostgreSQL "<table>_pkey", MySQL "PRIMARY"; SQLite's INTEGER PRIMARY KEY
// has none).
func indexes(ctx context.Context, q queryer, t engine.Table) (map[string]indexInfo, error) {
	var query string
	switch t.Kind {
	case engine.Postgres:
		query = `SELECT i.relname, ix.indisunique, ix.indisprimary, ix.indpred IS NOT NULL,
       am.amname, NOT (ix.indisvalid AND ix.indisready),
       COALESCE((to_jsonb(ix) ->> 'indnullsnotdistinct')::boolean, false),
       CASE WHEN k.ord > ix.indnkeyatts THEN 'INCLUDE ' || COALESCE(a.attname::text, '(expression)') ELSE
       COALESCE(a.attname::text, '(' || pg_get_indexdef(ix.indexrelid, k.ord::int, true) || ')')
         || CASE WHEN a.attname IS NOT NULL AND ix.indcollation[(k.ord - 1)::int] <> a.attcollation
                 THEN ' COLLATE ' || COALESCE((SELECT collname FROM pg_collation WHERE oid = ix.indcollation[(k.ord - 1)::int]), '?') ELSE '' END
         || CASE WHEN a.attname IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_opclass oc WHERE oc.oid = ix.indclass[(k.ord - 1)::int] AND oc.opcdefault)
                 THEN ' ' || COALESCE((SELECT opcname FROM pg_opclass WHERE oid = ix.indclass[(k.ord - 1)::int]), '?') ELSE '' END
         || CASE WHEN ix.indoption[(k.ord - 1)::int] & 1 = 1
                 THEN ' DESC' || CASE WHEN ix.indoption[(k.ord - 1)::int] & 2 = 0 THEN ' NULLS LAST' ELSE '' END
                 ELSE CASE WHEN ix.indoption[(k.ord - 1)::int] & 2 = 2 THEN ' NULLS FIRST' ELSE '' END END
       END
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_index ix ON ix.indrelid = c.oid
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_am am ON am.oid = i.relam
CROSS JOIN LATERAL unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum AND k.attnum > 0
WHERE n.nspname = current_schema() AND c.relname = $1
ORDER BY i.relname, k.ord`
	case engine.MySQL:
		// MariaDB has no EXPRESSION column, MySQL 8 has no way to tell a
		// functional part other than a NULL COLUMN_NAME: "(expression)".
		query = "SELECT INDEX_NAME, NON_UNIQUE = 0, INDEX_NAME = 'PRIMARY', FALSE, LOWER(INDEX_TYPE), FALSE, FALSE," +
			" CONCAT(COALESCE(COLUMN_NAME, '(expression)')," +
			"  CASE WHEN SUB_PART IS NULL THEN '' ELSE CONCAT('(', SUB_PART, ')') END," +
			"  CASE WHEN COLLATION = 'D' THEN ' DESC' ELSE '' END)" +
			" FROM information_schema.STATISTICS" +
			" WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?" +
			" ORDER BY INDEX_NAME, SEQ_IN_INDEX"
	case engine.SQLite:
		query = `SELECT il.name, il."unique", il.origin = 'pk', il.partial, 'btree', FALSE, FALSE,
       COALESCE(ii.name, '(expression)')
         || CASE WHEN ii.name IS NOT NULL AND upper(ii.coll) <> 'BINARY' THEN ' COLLATE ' || ii.coll ELSE '' END
         || CASE WHEN ii."desc" THEN ' DESC' ELSE '' END
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
		var name, method, col string
		var unique, primary, partial, invalid, nullsNotDistinct bool
		if err := rows.Scan(&name, &unique, &primary, &partial, &method, &invalid, &nullsNotDistinct, &col); err != nil {
			return nil, fmt.Errorf("read the indexes of table %s: %w", t.Name, err)
		}
		ix := idx[indexKey(t, name)]
		ix.Name, ix.Unique, ix.Primary, ix.Partial, ix.Method, ix.Invalid, ix.NullsNotDistinct = name, unique, primary, partial, method, invalid, nullsNotDistinct
		ix.Columns = append(ix.Columns, col)
		idx[indexKey(t, name)] = ix
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the indexes of table %s: %w", t.Name, err)
	}
	if t.Kind == engine.MySQL {
		if err := markHiddenMySQLIndexes(ctx, q, t, idx); err != nil {
			return nil, err
		}
	}
	return idx, nil
}

// markHiddenMySQLIndexes sets Invalid on the indexes in idx (of the MySQL
// table t) that the optimizer does not use: SHOW INDEX's Visible = NO on
// MySQL 8, Ignored = YES on MariaDB (information_schema.STATISTICS names
// the column differently on each, SHOW INDEX too, so the columns are found
// by name).
func markHiddenMySQLIndexes(ctx context.Context, q queryer, t engine.Table, idx map[string]indexInfo) error {
	rows, err := q.QueryContext(ctx, "SHOW INDEX FROM "+t.Quoted())
	if err != nil {
		return fmt.Errorf("read the indexes of table %s: %w", t.Name, err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return fmt.Errorf("read the indexes of table %s: %w", t.Name, err)
	}
	vals := make([]sql.NullString, len(names))
	ptrs := make([]any, len(names))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("read the indexes of table %s: %w", t.Name, err)
		}
		var key, unhide string
		for i, n := range names {
			switch v := vals[i].String; strings.ToLower(n) {
			case "key_name":
				key = v
			case "visible":
				if strings.EqualFold(v, "NO") {
					unhide = " VISIBLE"
				}
			case "ignored":
				if strings.EqualFold(v, "YES") {
					unhide = " NOT IGNORED"
				}
			}
		}
		if ix, ok := idx[indexKey(t, key)]; ok && unhide != "" {
			ix.Invalid = true
			ix.Unhide = "ALTER INDEX " + ddl.QuoteIdent(t.Kind, ix.Name) + unhide
			idx[indexKey(t, key)] = ix
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the indexes of table %s: %w", t.Name, err)
	}
	return nil
}

// queryOne runs query on q and scans its first row into dest; found is
// false when it returns no row. (execQueryer has no QueryRowContext: a
// *sql.Conn, *sql.Tx and *sql.DB all have QueryContext.)
func queryOne(ctx context.Context, q queryer, dest []any, query string, args ...any) (found bool, err error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return false, err
		}
		found = true
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	return found, rows.Close()
}
