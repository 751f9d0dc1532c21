package migrations

// Helpers of the Migrate tests: version 1 tables from testdata, their rows,
// and readers of the migrated table.

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// dump is every row of a table (SELECT *, ORDER BY id) as text, for
// comparing whole tables.
func dump(t testing.TB, db *sql.DB, k engine.Kind, table string) []string {
	t.Helper()
	// The comment makes the text unique: pgx caches prepared statements
	// by text, and SELECT * changes its result type when the table does.
	q := fmt.Sprintf("SELECT * /* %d */ FROM %s ORDER BY id", time.Now().UnixNano(), engine.Table{Kind: k, Name: table}.Quoted())
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i, v := range vals {
			switch v := v.(type) {
			case []byte:
				fmt.Fprintf(&b, "%s=%q ", names[i], v)
			case time.Time:
				fmt.Fprintf(&b, "%s=%s ", names[i], v.Format(time.RFC3339Nano))
			default:
				fmt.Fprintf(&b, "%s=%#v ", names[i], v)
			}
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// assertSameTable fails t unless the rows and the catalog of table equal
// rows and cat; what says which comparison it is.
func assertSameTable(t testing.TB, db *sql.DB, k engine.Kind, table string, rows []string, cat catalog, what string) {
	t.Helper()
	if diff := cmp.Diff(rows, dump(t, db, k, table)); diff != "" {
		t.Errorf("%s:\n%s", what, diff)
	}
	if diff := cmp.Diff(cat, readCatalog(t, db, k, table)); diff != "" {
		t.Errorf("%s (catalog):\n%s", what, diff)
	}
}

func readCatalog(t testing.TB, db *sql.DB, k engine.Kind, table string) catalog {
	t.Helper()
	ctx := context.Background()
	tb := engine.Table{Kind: k, Name: table}
	cols, err := columns(ctx, db, tb)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := indexes(ctx, db, tb)
	if err != nil {
		t.Fatal(err)
	}
	c := catalog{Columns: map[string]columnInfo{}, Indexes: map[string]indexInfo{}}
	for name, col := range cols {
		col.Default = strings.ReplaceAll(col.Default, table, "T") // PostgreSQL's sequence
		c.Columns[name] = col
	}
	for name, ix := range idx {
		name = strings.ReplaceAll(name, table, "T")
		ix.Name = name
		c.Indexes[name] = ix
	}
	return c
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
