package migrations

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

func TestInstallRejectsBadTableNamesBeforeAnySQL(t *testing.T) {
	t.Parallel()
	long51 := strings.Repeat("a", 51)
	cases := []struct {
		name  string
		kinds []engine.Kind
	}{
		{"", testdb.Kinds()},
		{"1abc", testdb.Kinds()},
		{"a-b", testdb.Kinds()},
		{"x;drop", testdb.Kinds()},
		{"jobs table", testdb.Kinds()},
		{`jo"bs`, testdb.Kinds()},
		{"jöbs", testdb.Kinds()},
		{long51, []engine.Kind{engine.Postgres}},
		{strings.Repeat("a", 57), testdb.Kinds()}, // no room left for the side tables' <table>_<suffix>
		{strings.Repeat("a", 65), testdb.Kinds()},
		// SQLite reserves names that start with sqlite_ (any case); it
		// said "SQL logic error: object name reserved for internal use".
		{"sqlite_jobs", []engine.Kind{engine.SQLite}},
		{"SQLite_Jobs", []engine.Kind{engine.SQLite}},
		{"sqlite", []engine.Kind{engine.SQLite}}, // its side tables: sqlite_unique, …
	}
	testdb.ForEachKind(t, func(t *testing.T, k engine.Kind) {
		db := closedDB(t, k)
		// The control: with a valid name the closed database is reached.
		if err := Install(context.Background(), db, "jobs"); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("Install on a closed database with a valid name: %v; want a 'closed' error", err)
		}
		for _, c := range cases {
			if !slices.Contains(c.kinds, k) {
				continue
			}
			t.Run(fmt.Sprintf("%q", c.name), func(t *testing.T) {
				err := Install(context.Background(), db, c.name)
				if !errors.Is(err, ErrInvalidTableName) {
					t.Errorf("Install = %v; want ErrInvalidTableName", err)
				}
				if _, err := GooseMigrations(db, c.name, RetryPolicy{}, 1); !errors.Is(err, ErrInvalidTableName) {
					t.Errorf("GooseMigrations = %v; want ErrInvalidTableName", err)
				}
			})
		}
	})
}

func TestInstallFoldsNamesToLowerCaseOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, engine.Postgres)
	name := testdb.Table(t, db) // lower case; dropped at the end
	upper := strings.ToUpper(name[:1]) + name[1:]
	if err := Install(ctx, db, upper); err != nil {
		t.Fatal(err)
	}
	if err := Install(ctx, db, name); err != nil {
		t.Fatalf("Install(%q) after Install(%q): %v", name, upper, err)
	}
	if err := Install(ctx, db, strings.ToUpper(name)); err != nil {
		t.Fatalf("Install(%q): %v", strings.ToUpper(name), err)
	}
	names := testdb.Strings(t, db, `SELECT table_name FROM information_schema.tables
WHERE table_schema = current_schema() AND lower(table_name) = $1`, name)
	if diff := cmp.Diff([]string{name}, names); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantIndexes(engine.Postgres, name), testIndexes(t, db, tableOf(t, engine.Postgres, name))); diff != "" {
		t.Errorf("indexes (-want +got):\n%s", diff)
	}
}

// TestInstallNamesDifferingInCaseOnSQLite: SQLite's names ignore case,
// so Install of "jobs" after "Jobs" is the same table; it failed, saying
// that idx_jobs_status_scheduled was "not on (status, scheduled_at, id)
// after install (found [])" (the catalog's idx_Jobs_… did not match).
func TestInstallNamesDifferingInCaseOnSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testdb.New(t, engine.SQLite)
	name := "Jobs"
	for _, n := range []string{name, "jobs", "JOBS", name} {
		if err := Install(ctx, e.DB, n); err != nil {
			t.Fatalf("Install(%q) after Install(%q): %v", n, name, err)
		}
		if err := Check(ctx, e.DB, n); err != nil {
			t.Errorf("Check(%q): %v", n, err)
		}
	}
	if diff := cmp.Diff(wantIndexes(engine.SQLite, name), testIndexes(t, e.DB, tableOf(t, engine.SQLite, name))); diff != "" {
		t.Errorf("indexes (-want +got):\n%s", diff)
	}
	if err := Uninstall(ctx, e.DB, "jobs"); err != nil {
		t.Fatalf("Uninstall(%q): %v", "jobs", err)
	}
	if n := testdb.Strings(t, e.DB, `SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'`); len(n) != 0 {
		t.Errorf("after Uninstall the database holds %v", n)
	}
}

func TestInstallLongNamesOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, engine.Postgres)
	name := testdb.Table(t, nil)
	name += strings.Repeat("x", 50-len(name))
	t.Cleanup(func() { testdb.Drop(t, db, name) })
	if err := Install(ctx, db, name); err != nil {
		t.Fatal(err)
	}
	got := testIndexes(t, db, tableOf(t, engine.Postgres, name))
	seen := map[string]bool{}
	for _, ix := range got {
		if len(ix.Name) > 63 {
			t.Errorf("index name %q has %d bytes", ix.Name, len(ix.Name))
		}
		if seen[ix.Name] {
			t.Errorf("index name %q twice", ix.Name)
		}
		seen[ix.Name] = true
	}
	want := []testIndex{
		{Name: name + "_pkey", Unique: true, Columns: []string{"id"}},
		{Name: ("idx_" + name + "_lease_until")[:63], Columns: []string{"lease_until"}},
		{Name: ("idx_" + name + "_status_expires")[:63], Columns: []string{"status", "expires_at"}},
		{Name: ("idx_" + name + "_status_scheduled")[:63], Columns: []string{"status", "scheduled_at", "id"}},
		{Name: ("idx_" + name + "_type_status_scheduled")[:63], Columns: []string{"type", "status", "scheduled_at", "id"}},
	}
	sortIndexes(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("indexes (-want +got):\n%s", diff)
	}
	if err := Install(ctx, db, name); err != nil {
		t.Fatalf("second Install: %v", err)
	}
	if err := Install(ctx, db, name+"y"); !errors.Is(err, ErrInvalidTableName) {
		t.Errorf("Install of a 51-character name: %v; want ErrInvalidTableName", err)
	}
}

// TestInstallLongestNames: with the longest table name each engine accepts
// (PostgreSQL 50, MySQL and SQLite 56), Install creates the table and
// every side table, and runs again; one more character is refused.
func TestInstallLongestNames(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		max := 56
		if e.Kind == engine.Postgres {
			max = 50
		}
		name := testdb.Table(t, nil)
		name += strings.Repeat("x", max-len(name))
		t.Cleanup(func() { testdb.Drop(t, e.DB, name) })
		for i := range 2 {
			if err := Install(ctx, e.DB, name); err != nil {
				t.Fatalf("Install #%d of a %d-character name: %v", i+1, len(name), err)
			}
		}
		tb := tableOf(t, e.Kind, name)
		for _, o := range ddl.Objects(tb) {
			if o.Drop == "" {
				continue
			}
			if st, err := inspect(ctx, e.DB, o.Table); err != nil || st == tableMissing {
				t.Errorf("%s %s: %v (%v); want it created", o.Kind, o.Name, st, err)
			}
			if got := testColumns(t, e.DB, o.Table); len(got) == 0 {
				t.Errorf("%s %s has no columns", o.Kind, o.Name)
			}
		}
		if err := Install(ctx, e.DB, name+"y"); !errors.Is(err, ErrInvalidTableName) {
			t.Errorf("Install of a %d-character name: %v; want ErrInvalidTableName", len(name)+1, err)
		}
	})
}

// TestMigrateNameDifferingInCaseOnSQLite: Migrate of a version 1 table
// under another case of its name (old_jobs for Old_Jobs, the same table on
// SQLite) keeps the AUTOINCREMENT counter, so the id of a deleted job is
// never given again, and the rows.
func TestMigrateNameDifferingInCaseOnSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testdb.New(t, engine.SQLite)
	name := "Old_Jobs"
	createV1(t, e.DB, e.Kind, name)
	insertV1(t, e.DB, e.Kind, name, v1Fixture(e.Kind, time.Now().UTC()))
	mustExec(t, e.DB, `DELETE FROM "Old_Jobs" WHERE id = (SELECT max(id) FROM "Old_Jobs")`)
	var seq, jobs int64
	if err := e.DB.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'Old_Jobs'`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if err := e.DB.QueryRowContext(ctx, `SELECT count(*) FROM "Old_Jobs"`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, e.DB, testPolicy, "old_jobs"); err != nil {
		t.Fatal(err)
	}
	var after, jobsAfter int64
	if err := e.DB.QueryRowContext(ctx, `SELECT max(seq), count(*) FROM sqlite_sequence WHERE name = 'old_jobs' COLLATE NOCASE`).Scan(&after, &jobsAfter); err != nil || jobsAfter != 1 || after < seq {
		t.Errorf("sqlite_sequence after Migrate: seq %d in %d rows (%v); want one row with at least %d", after, jobsAfter, err, seq)
	}
	if err := e.DB.QueryRowContext(ctx, `SELECT count(*) FROM "Old_Jobs"`).Scan(&jobsAfter); err != nil || jobsAfter != jobs {
		t.Errorf("%d jobs after Migrate (%v); want %d", jobsAfter, err, jobs)
	}
	if err := Check(ctx, e.DB, name); err != nil {
		t.Errorf("Check(%q) after Migrate: %v", name, err)
	}
}

// TestInstallMigrateUninstallRefuseAView: a view under the name (here one
// that selects every column of a jobs table, so its columns look like
// one) is refused by Install, Migrate and Uninstall with an error wrapping
// ErrForeignTable that says it is a view, creating and dropping nothing.
// They went on as for a table and failed at the engine ("cannot create
// index on relation", "is not a table"), Install and Migrate leaving the
// view's side tables behind on MySQL.
func TestInstallMigrateUninstallRefuseAView(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		real := tableOf(t, e.Kind, e.Table(t))
		view := tableOf(t, e.Kind, e.Table(t))
		if err := Install(ctx, e.DB, real.Name); err != nil {
			t.Fatal(err)
		}
		mustExec(t, e.DB, "CREATE VIEW "+view.Quoted()+" AS SELECT * FROM "+real.Quoted())
		t.Cleanup(func() { mustExec(t, e.DB, "DROP VIEW IF EXISTS "+view.Quoted()) })
		calls := map[string]func() error{
			"Install":   func() error { return Install(ctx, e.DB, view.Name) },
			"Migrate":   func() error { return Migrate(ctx, e.DB, testPolicy, view.Name) },
			"Uninstall": func() error { return Uninstall(ctx, e.DB, view.Name) },
		}
		for name, call := range calls {
			err := call()
			if !errors.Is(err, ErrForeignTable) || !strings.Contains(fmt.Sprint(err), "is a view") {
				t.Errorf("%s on a view = %v; want ErrForeignTable saying it is a view", name, err)
			}
		}
		if kind, err := relationKind(ctx, e.DB, view); err != nil || kind != "view" {
			t.Errorf("the view is now %q (%v)", kind, err)
		}
		for _, o := range ddl.SideObjects(view) {
			if kind, err := relationKind(ctx, e.DB, o.Table); err != nil || kind != "" {
				t.Errorf("side object %s of the view: %q (%v); want none", o.Name, kind, err)
			}
		}
		if err := Check(ctx, e.DB, real.Name); err != nil {
			t.Errorf("Check of the table under the view: %v", err)
		}
	})
}

// TestInstallWithoutSchemaOnPostgres: on a connection whose search_path
// names no schema that exists, Install says so and what to do; it failed
// at CREATE TABLE with "no schema has been selected to create in" (and
// its lock, keyed by current_schema(), which was NULL, locked nothing).
func TestInstallWithoutSchemaOnPostgres(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.URL(t, engine.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Set("options", "-c search_path=jobqueue_no_such_schema")
	u.RawQuery = strings.ReplaceAll(v.Encode(), "+", "%20") // pgx reads a '+' as itself
	db := testdb.OpenURL(t, u.String())
	err = Install(context.Background(), db, "jobs")
	if err == nil || !strings.Contains(err.Error(), "jobqueue_no_such_schema") || !strings.Contains(err.Error(), "create that schema") {
		t.Errorf("Install without a schema = %v; want an error naming the search_path and saying to create the schema", err)
	}
}

// TestInstallIndexNameOfAnotherQueue: on PostgreSQL and SQLite, where
// index names are per schema, the tables X and X_type cannot both be
// installed: X's idx_X_type_status_scheduled is X_type's
// idx_X_type_status_scheduled. The second Install fails, creating nothing,
// and its error names the table that holds the index and says to choose
// another table name; it said "is the name taken by another table's
// index? drop or rename that one", which would break the other queue.
func TestInstallIndexNameOfAnotherQueue(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		if e.Kind == engine.MySQL {
			return // index names are per table there
		}
		ctx := context.Background()
		short := tableOf(t, e.Kind, e.Table(t))
		long := tableOf(t, e.Kind, short.Name+"_type")
		t.Cleanup(func() { testdb.Drop(t, e.DB, long.Name) })
		if err := Install(ctx, e.DB, long.Name); err != nil {
			t.Fatal(err)
		}
		err := Install(ctx, e.DB, short.Name)
		if err == nil || !strings.Contains(err.Error(), "table "+long.Name+" holds") || !strings.Contains(err.Error(), "choose another table name") || strings.Contains(err.Error(), "drop or rename") {
			t.Errorf("Install(%q) after Install(%q) = %v; want an error naming %s and saying to choose another name", short.Name, long.Name, err, long.Name)
		}
		if st, err := inspect(ctx, e.DB, short); err != nil || st != tableMissing {
			t.Errorf("table %s after the refused Install: %s, %v; want missing", short.Name, st, err)
		}
		if err := Check(ctx, e.DB, long.Name); err != nil {
			t.Errorf("Check(%q): %v", long.Name, err)
		}

		// A table of yours holding the name: drop or rename its index.
		mine := tableOf(t, e.Kind, e.Table(t))
		next := tableOf(t, e.Kind, e.Table(t))
		mustExec(t, e.DB, "CREATE TABLE "+mine.Quoted()+" (x INT)",
			"CREATE INDEX "+ddl.QuoteIdent(e.Kind, next.IndexName("lease_until"))+" ON "+mine.Quoted()+" (x)")
		err = Install(ctx, e.DB, next.Name)
		if err == nil || !strings.Contains(err.Error(), "table "+mine.Name+" holds") || !strings.Contains(err.Error(), "drop or rename that index") {
			t.Errorf("Install(%q) with its index name on %s = %v; want an error naming %s and saying to drop or rename that index", next.Name, mine.Name, err, mine.Name)
		}
	})
}
