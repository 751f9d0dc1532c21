package migrations

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// sideTaker is an object that holds the name of a side object of a jobs
// table without being it.
type sideTaker struct {
	name string
	// suffix is the side object whose name it takes.
	suffix string
	// only limits the case to one engine ("" for all).
	only engine.Kind
	// create makes the taker side, with a row of its own.
	create func(t *testing.T, e *testdb.Env, side engine.Table)
	// drop removes it at the end of the test.
	drop func(side engine.Table) string
	// rows reads the taker's rows as text.
	rows func(side engine.Table) string
}

// sideTakers are the tables and views TestSideObjectNameTaken puts under a
// side object's name.
var sideTakers = []sideTaker{
	{
		name: "another queue's jobs table", suffix: "leader",
		create: func(t *testing.T, e *testdb.Env, side engine.Table) {
			if err := Install(context.Background(), e.DB, side.Name); err != nil {
				t.Fatal(err)
			}
			mustExec(t, e.DB, v2Row(side))
		},
		rows: func(side engine.Table) string { return "SELECT name FROM " + side.Quoted() },
	},
	{
		name: "a table with other columns", suffix: "unique",
		create: func(t *testing.T, e *testdb.Env, side engine.Table) {
			mustExec(t, e.DB, "CREATE TABLE "+side.Quoted()+" (id INT PRIMARY KEY, note VARCHAR(20))",
				"INSERT INTO "+side.Quoted()+" (id, note) VALUES (1, 'keep me')")
		},
		rows: func(side engine.Table) string { return "SELECT note FROM " + side.Quoted() },
	},
	{
		name: "a table with the side table's columns and one more", suffix: "leader",
		create: func(t *testing.T, e *testdb.Env, side engine.Table) {
			mustExec(t, e.DB, "CREATE TABLE "+side.Quoted()+` (name VARCHAR(64) PRIMARY KEY, holder VARCHAR(255) NOT NULL,
    term BIGINT NOT NULL, renewals BIGINT NOT NULL, since TIMESTAMP NULL, renewed_at TIMESTAMP NULL,
    lease_until TIMESTAMP NULL, note VARCHAR(20))`,
				"INSERT INTO "+side.Quoted()+" (name, holder, term, renewals, note) VALUES ('maintenance', 'me', 1, 0, 'keep me')")
		},
		rows: func(side engine.Table) string { return "SELECT note FROM " + side.Quoted() },
	},
	{
		name: "a view with the side table's columns", suffix: "unique",
		create: func(t *testing.T, e *testdb.Env, side engine.Table) {
			mustExec(t, e.DB, "CREATE VIEW "+side.Quoted()+" AS SELECT 1 AS job_id, 'keep me' AS unique_key, 'k' AS live_key, 'x' AS held_until")
		},
		drop: func(side engine.Table) string { return "DROP VIEW IF EXISTS " + side.Quoted() },
		rows: func(side engine.Table) string { return "SELECT unique_key FROM " + side.Quoted() },
	},
	{
		name: "a table under the side view's name", suffix: "keyed", only: engine.SQLite,
		create: func(t *testing.T, e *testdb.Env, side engine.Table) {
			mustExec(t, e.DB, "CREATE TABLE "+side.Quoted()+" (id INTEGER PRIMARY KEY, note TEXT)",
				"INSERT INTO "+side.Quoted()+" (id, note) VALUES (1, 'keep me')")
		},
		rows: func(side engine.Table) string { return "SELECT note FROM " + side.Quoted() },
	},
}

// sideObjectKinds is what holds the name of each side object of tb
// ("" for nothing), by name.
func sideObjectKinds(t *testing.T, e *testdb.Env, tb engine.Table) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range ddl.SideObjects(tb) {
		if o.Kind != ddl.SideTableKind && o.Kind != ddl.SideView {
			continue
		}
		k, err := relationKind(context.Background(), e.DB, o.Table)
		if err != nil {
			t.Fatal(err)
		}
		out[o.Name] = k
	}
	return out
}

// TestSideObjectNameTaken: when the name of a side table or view
// (<table>_<suffix>) is held by something that is not it (another queue's
// jobs table, a table with other columns or one column more, a view
// instead of a table, a table instead of SQLite's view), Check, Install,
// Migrate and Uninstall of the table refuse with an error wrapping
// ErrForeignTable that names it, whether the jobs table is missing or
// installed, and change nothing: Install creates no table, Uninstall drops
// none, and the taker keeps its rows.
func TestSideObjectNameTaken(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range sideTakers {
			if c.only != "" && c.only != e.Kind {
				continue
			}
			for _, installed := range []bool{false, true} {
				t.Run(strings.ReplaceAll(c.name, " ", "_")+map[bool]string{false: "/jobs_table_missing", true: "/jobs_table_installed"}[installed], func(t *testing.T) {
					ctx := context.Background()
					tb := tableOf(t, e.Kind, e.Table(t))
					side := ddl.Side(tb, c.suffix)
					if installed {
						if err := Install(ctx, e.DB, tb.Name); err != nil {
							t.Fatal(err)
						}
						mustExec(t, e.DB, v2Row(tb))
						drop := ddl.DropTable(side)
						if c.suffix == "keyed" {
							drop = "DROP VIEW " + side.Quoted()
						}
						mustExec(t, e.DB, drop)
					}
					t.Cleanup(func() {
						if c.drop != nil {
							mustExec(t, e.DB, c.drop(side))
						} else {
							testdb.Drop(t, e.DB, side.Name)
						}
					})
					c.create(t, e, side)
					rows := testdb.Strings(t, e.DB, c.rows(side))
					kinds := sideObjectKinds(t, e, tb)
					var jobs []string
					if installed {
						jobs = dumpRows(t, e.DB, tb)
					}

					for _, op := range []struct {
						name string
						run  func() error
					}{
						{"Check", func() error { return Check(ctx, e.DB, tb.Name) }},
						{"Install", func() error { return Install(ctx, e.DB, tb.Name) }},
						{"Migrate", func() error { return Migrate(ctx, e.DB, testPolicy, tb.Name) }},
						{"Uninstall", func() error { return Uninstall(ctx, e.DB, tb.Name) }},
					} {
						err := op.run()
						if !errors.Is(err, ErrForeignTable) || !strings.Contains(err.Error(), side.Name) {
							t.Errorf("%s = %v; want an error wrapping ErrForeignTable naming %s", op.name, err, side.Name)
						}
					}

					if diff := cmp.Diff(rows, testdb.Strings(t, e.DB, c.rows(side))); diff != "" {
						t.Errorf("the rows of %s changed (-before +after):\n%s", side.Name, diff)
					}
					if diff := cmp.Diff(kinds, sideObjectKinds(t, e, tb)); diff != "" {
						t.Errorf("side objects created or dropped (-before +after):\n%s", diff)
					}
					st, err := inspect(ctx, e.DB, tb)
					switch {
					case err != nil:
						t.Fatal(err)
					case !installed && st != tableMissing:
						t.Errorf("the jobs table is %v after the refusals; want it still missing", st)
					case installed:
						if diff := cmp.Diff(jobs, dumpRows(t, e.DB, tb)); diff != "" {
							t.Errorf("the jobs table changed (-before +after):\n%s", diff)
						}
					}
				})
			}
		}
	})
}

// TestSideObjectsMatchTheirDeclaredColumns: on every engine the side tables
// and views Install creates are, in the catalog, of the kind and with
// exactly the columns internal/ddl declares for them (which is what
// checkSideObjects compares), and Install's second run accepts them.
func TestSideObjectsMatchTheirDeclaredColumns(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		tb := tableOf(t, e.Kind, e.Table(t))
		if err := Install(ctx, e.DB, tb.Name); err != nil {
			t.Fatal(err)
		}
		for _, o := range ddl.SideObjects(tb) {
			if o.Kind != ddl.SideTableKind && o.Kind != ddl.SideView {
				continue
			}
			cols, err := columns(ctx, e.DB, o.Table)
			if err != nil {
				t.Fatal(err)
			}
			got := sortedKeys(cols)
			want := slices.Sorted(slices.Values(o.Columns))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %s: columns (-declared +catalog):\n%s", o.Kind, o.Name, diff)
			}
		}
		if err := checkSideObjects(ctx, e.DB, tb); err != nil {
			t.Errorf("checkSideObjects after Install: %v", err)
		}
		if err := Install(ctx, e.DB, tb.Name); err != nil {
			t.Errorf("second Install: %v", err)
		}
	})
}
