package migrations

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// indexRepairCase is one way to spoil an index that Install must repair.
type indexRepairCase struct {
	name string
	kind engine.Kind // "" for every engine
	// setup returns the statements that spoil an index of target (the
	// jobs table or one of its side tables, see testIndexRepairs). On
	// MariaDB, " INVISIBLE" in them is replaced by " IGNORED", its
	// spelling.
	setup func(target engine.Table) []string
}

// testIndexRepairs runs each case of cases on every engine it applies to,
// in parallel, each on a table of its own: Install creates the table and
// a row goes in; the case's setup spoils an index of target(table); then
// Install must succeed and repair it, which check (when not nil) checks
// further. After it, on MySQL no index of the target is hidden from the
// optimizer, the jobs table's rows are as they were, and an Install more
// changes nothing in the catalog of the jobs table or of the target (it
// is idempotent: a right index is not rebuilt).
func testIndexRepairs(t *testing.T, cases []indexRepairCase, target func(engine.Table) engine.Table, check func(t *testing.T, e *testdb.Env, tb engine.Table)) {
	t.Helper()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			if c.kind != "" && c.kind != e.Kind {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				name := e.Table(t)
				tb := tableOf(t, e.Kind, name)
				if err := Install(ctx, e.DB, name); err != nil {
					t.Fatal(err)
				}
				mustExec(t, e.DB, v2Row(tb))
				rows := dumpRows(t, e.DB, tb)
				tgt := target(tb)
				setup := c.setup(tgt)
				skipUnlessServerTakes(t, e, setup)
				if e.Kind == engine.MySQL && isMariaDB(t, e.DB) {
					for i, q := range setup {
						setup[i] = strings.Replace(q, " INVISIBLE", " IGNORED", 1)
					}
				}
				mustExec(t, e.DB, setup...)

				if err := Install(ctx, e.DB, name); err != nil {
					t.Fatalf("Install: %v", err)
				}
				if check != nil {
					check(t, e, tb)
				}
				if e.Kind == engine.MySQL {
					if hidden := mysqlHiddenIndexNames(t, e, tgt); len(hidden) != 0 {
						t.Errorf("indexes of %s still invisible (ignored): %v", tgt.Name, hidden)
					}
				}
				if diff := cmp.Diff(rows, dumpRows(t, e.DB, tb)); diff != "" {
					t.Errorf("rows changed (-before +after):\n%s", diff)
				}

				// Install again changes nothing.
				before := map[string]snapshot{tb.Name: takeSnapshot(t, e.DB, tb), tgt.Name: takeSnapshot(t, e.DB, tgt)}
				if err := Install(ctx, e.DB, name); err != nil {
					t.Fatalf("Install again: %v", err)
				}
				after := map[string]snapshot{tb.Name: takeSnapshot(t, e.DB, tb), tgt.Name: takeSnapshot(t, e.DB, tgt)}
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("Install again changed the catalog (-before +after):\n%s", diff)
				}
			})
		}
	})
}

// mysqlHiddenIndexNames are the indexes of tb that SHOW INDEX says the
// optimizer does not use: Visible = NO (MySQL 8) or Ignored = YES (MariaDB).
func mysqlHiddenIndexNames(t *testing.T, e *testdb.Env, tb engine.Table) []string {
	t.Helper()
	rows, err := e.DB.QueryContext(context.Background(), "SHOW INDEX FROM "+tb.Quoted())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var hidden []string
	for rows.Next() {
		vals := make([]sql.NullString, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, n := range names {
			row[strings.ToLower(n)] = vals[i].String
		}
		if strings.EqualFold(row["visible"], "NO") || strings.EqualFold(row["ignored"], "YES") {
			hidden = append(hidden, row["key_name"])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return hidden
}

// skipUnlessServerTakes skips t when stmts use syntax the server of e is
// too old for: NULLS NOT DISTINCT needs PostgreSQL 15.
func skipUnlessServerTakes(t *testing.T, e *testdb.Env, stmts []string) {
	t.Helper()
	if e.Kind != engine.Postgres || !slices.ContainsFunc(stmts, func(s string) bool { return strings.Contains(s, "NULLS NOT DISTINCT") }) {
		return
	}
	var v int
	if err := e.DB.QueryRowContext(context.Background(), "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v < 150000 {
		t.Skipf("NULLS NOT DISTINCT needs PostgreSQL 15; the server is %d", v)
	}
}
