package migrations

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestUninstallFailureDropsNothing: an Uninstall that cannot drop
// everything drops nothing: a view of yours on the jobs table
// (PostgreSQL refuses to drop the table; one transaction rolls back the
// side tables' drops), a foreign key of your table to the jobs table or to
// a side table (refused on every engine before any drop; on SQLite with
// foreign_keys on the drop would otherwise delete your rows through ON
// DELETE CASCADE). The error names what is in the way, and every table,
// job and row of yours is still there.
func TestUninstallFailureDropsNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		only engine.Kind
		// setup creates the obstacle, named after the jobs table tb, and
		// returns the statement that removes it and a query of its rows
		// ("" when it has none).
		setup func(t *testing.T, db *sql.DB, tb engine.Table) (drop, rows string)
		// want is in the error.
		want string
	}{
		{
			name: "view on the jobs table", only: engine.Postgres,
			setup: func(t *testing.T, db *sql.DB, tb engine.Table) (string, string) {
				v := engine.Table{Kind: tb.Kind, Name: tb.Name + "_v"}
				mustExec(t, db, "CREATE VIEW "+v.Quoted()+" AS SELECT id FROM "+tb.Quoted())
				return "DROP VIEW IF EXISTS " + v.Quoted(), ""
			},
			want: "depend on it",
		},
		{
			name: "foreign key to the jobs table",
			setup: func(t *testing.T, db *sql.DB, tb engine.Table) (string, string) {
				return childOf(t, db, tb, tb, "id")
			},
			want: "_child",
		},
		{
			name: "foreign key to a side table",
			setup: func(t *testing.T, db *sql.DB, tb engine.Table) (string, string) {
				return childOf(t, db, tb, ddl.Side(tb, "unique"), "job_id")
			},
			want: "_child",
		},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			if c.only != "" && c.only != e.Kind {
				continue
			}
			t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
				ctx := context.Background()
				db := e.DB
				if e.Kind == engine.SQLite {
					db = testdb.OpenURL(t, e.URL+"?_pragma=foreign_keys(1)")
				}
				tb := tableOf(t, e.Kind, e.Table(t))
				if err := Install(ctx, db, tb.Name); err != nil {
					t.Fatal(err)
				}
				mustExec(t, db, v2Row(tb), "INSERT INTO "+ddl.Side(tb, "unique").Quoted()+" (job_id, unique_key, live_key, held_until) SELECT id, 'k', 'k', created_at FROM "+tb.Quoted())
				drop, rowsQuery := c.setup(t, db, tb)
				t.Cleanup(func() { mustExec(t, db, drop) })
				var rows []string
				if rowsQuery != "" {
					rows = testdb.Strings(t, db, rowsQuery)
				}
				jobs := dumpRows(t, db, tb)

				err := Uninstall(ctx, db, tb.Name)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("Uninstall = %v; want an error containing %q", err, c.want)
				}
				for _, o := range ddl.Objects(tb) {
					if _, err := db.ExecContext(ctx, "SELECT 1 FROM "+o.Table.Quoted()+" WHERE 1 = 0"); o.Drop != "" && err != nil {
						t.Errorf("%s %s was dropped by the failed Uninstall: %v", o.Kind, o.Name, err)
					}
				}
				if diff := cmp.Diff(jobs, dumpRows(t, db, tb)); diff != "" {
					t.Errorf("jobs after the failed Uninstall (-before +after):\n%s", diff)
				}
				if rowsQuery != "" {
					if diff := cmp.Diff(rows, testdb.Strings(t, db, rowsQuery)); diff != "" {
						t.Errorf("your rows after the failed Uninstall (-before +after):\n%s", diff)
					}
				}
			})
		}
	})
}

// childOf creates <tb>_child, a table with a foreign key (ON DELETE
// CASCADE) to column col of parent and a row referencing each of its rows,
// and returns the statement that drops it and a query of its rows.
func childOf(t *testing.T, db *sql.DB, tb, parent engine.Table, col string) (drop, rows string) {
	t.Helper()
	child := engine.Table{Kind: tb.Kind, Name: tb.Name + "_child"}
	typ := map[engine.Kind]string{engine.Postgres: "BIGINT", engine.MySQL: "BIGINT UNSIGNED", engine.SQLite: "INTEGER"}[tb.Kind]
	mustExec(t, db,
		"CREATE TABLE "+child.Quoted()+" (ref "+typ+", note VARCHAR(20), FOREIGN KEY (ref) REFERENCES "+parent.Quoted()+" ("+col+") ON DELETE CASCADE)",
		"INSERT INTO "+child.Quoted()+" (ref, note) SELECT "+col+", 'keep me' FROM "+parent.Quoted())
	return "DROP TABLE IF EXISTS " + child.Quoted(), "SELECT note FROM " + child.Quoted()
}

// TestUninstallReadOnly: Uninstall on a PostgreSQL connection that accepts
// no writes (default_transaction_read_only on, as on a standby) says first
// to connect to the primary, then that nothing was dropped and to run
// Uninstall again; it said to remove what "stands in the way" as for a
// view of yours, with the read-only advice missing.
func TestUninstallReadOnly(t *testing.T) {
	t.Parallel()
	direct := testdb.Open(t, engine.Postgres)
	name := testdb.Table(t, direct)
	ctx := context.Background()
	if err := Install(ctx, direct, name); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testdb.URL(t, engine.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Set("options", "-c default_transaction_read_only=on")
	u.RawQuery = strings.ReplaceAll(v.Encode(), "+", "%20") // pgx reads a '+' as itself
	ro := testdb.OpenURL(t, u.String())
	err = Uninstall(ctx, ro, name)
	if err == nil {
		t.Fatal("Uninstall on a read-only connection succeeded")
	}
	msg := err.Error()
	primary := strings.Index(msg, "connect to the primary")
	again := strings.Index(msg, "nothing was dropped (one transaction); fix the cause and run Uninstall again")
	if primary < 0 || again < primary || strings.Contains(msg, "in the way") {
		t.Errorf("Uninstall error %q: want the read-only advice, then that nothing was dropped and to run Uninstall again", msg)
	}
	if err := Check(ctx, direct, name); err != nil {
		t.Errorf("table after the refused Uninstall: %v", err)
	}
}
