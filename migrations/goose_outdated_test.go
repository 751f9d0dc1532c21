package migrations

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// gooseProviderFor is a goose Provider, run by goose's own SQL runner,
// over a temp dir holding only the file GooseSQL writes for table name;
// goose's version table is goose_<name>, dropped when the test ends.
func gooseProviderFor(t *testing.T, e *testdb.Env, name string) *goose.Provider {
	t.Helper()
	dir, versionTable := gooseDirFor(t, e, name)
	dialect, err := gooseDialect(e.Kind)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(dialect, e.DB, os.DirFS(dir), goose.WithDisableGlobalRegistry(true), goose.WithTableName(versionTable))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ListSources(); len(got) != 1 || filepath.Ext(got[0].Path) != ".sql" {
		t.Fatalf("goose found %v, want the one SQL file", got)
	}
	return p
}

// TestGooseUpRefusesTableNotVersion2: the goose file's Up, run by goose's
// own SQL runner, refuses a table of its name that is not a version 2
// jobqueue table, as Install does: a version 1 table, one whose migration
// was interrupted, another program's, a view. It fails with a message naming
// jobqueue migrate, leaves the table as it was and creates no side table.
// It went through on MySQL, recorded as applied over a version 1 table
// (CREATE TABLE IF NOT EXISTS left it as it was), and failed elsewhere
// with "column lease_until does not exist". A version 2 table goes
// through (the control).
func TestGooseUpRefusesTableNotVersion2(t *testing.T) {
	t.Parallel()
	addColumn := func(def string) func(engine.Table) []string {
		return func(tb engine.Table) []string {
			return []string{"ALTER TABLE " + tb.Quoted() + " ADD COLUMN " + def}
		}
	}
	cases := []struct {
		name  string
		kinds []engine.Kind
		v2    bool // start from an installed table (else version 1)
		more  func(engine.Table) []string
		// view, when set, replaces the table by a view after more.
		view func(t *testing.T, e *testdb.Env, tb engine.Table)
		ok   bool
	}{
		{name: "version 1", kinds: testdb.Kinds()},
		{name: "version 1 plus some v2 columns", kinds: testdb.Kinds(), more: addColumn("attempts INTEGER NOT NULL DEFAULT 0")},
		{name: "v2 with retry_count left", kinds: testdb.Kinds(), v2: true, more: addColumn("retry_count INTEGER NOT NULL DEFAULT 0")},
		{name: "v2 with locked_at left", kinds: testdb.Kinds(), v2: true, more: addColumn("locked_at TIMESTAMP NULL")},
		{name: "mysql status without expired", kinds: []engine.Kind{engine.MySQL}, v2: true, more: func(tb engine.Table) []string {
			return []string{"ALTER TABLE " + tb.Quoted() + " MODIFY status ENUM('pending','in_progress','completed','failed') NOT NULL DEFAULT 'pending'"}
		}},
		{name: "mysql created_at still TIMESTAMP", kinds: []engine.Kind{engine.MySQL}, v2: true, more: func(tb engine.Table) []string {
			return []string{"ALTER TABLE " + tb.Quoted() + " MODIFY created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP"}
		}},
		{name: "another program's table", kinds: testdb.Kinds(), more: func(tb engine.Table) []string {
			return []string{"DROP TABLE " + tb.Quoted(), "CREATE TABLE " + tb.Quoted() + " (id INTEGER PRIMARY KEY, status VARCHAR(20), note TEXT)"}
		}},
		// Install refuses a view (ErrViewName); CREATE TABLE IF NOT EXISTS
		// skipped it, and on MySQL the migration went through.
		{name: "a view of a version 2 table", kinds: testdb.Kinds(), view: viewOfInstalled},
		{name: "version 2 with a column of the user's", kinds: testdb.Kinds(), v2: true, more: addColumn("tenant VARCHAR(32)"), ok: true},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			if !slices.Contains(c.kinds, e.Kind) {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				name := e.Table(t)
				tb := tableOf(t, e.Kind, name)
				if c.v2 {
					if err := Install(ctx, e.DB, name); err != nil {
						t.Fatal(err)
					}
					mustExec(t, e.DB, v2Row(tb))
					for _, st := range ddl.SideTables() {
						mustExec(t, e.DB, ddl.DropTable(ddl.Side(tb, st.Suffix)))
					}
				} else {
					mustExec(t, e.DB, append(v1DDL(tb), v1Rows(tb))...)
				}
				if c.more != nil {
					mustExec(t, e.DB, c.more(tb)...)
				}
				if c.view != nil {
					c.view(t, e, tb)
				}
				var before tableImage
				if c.view == nil {
					before = imageOf(t, e.DB, tb)
				}
				p := gooseProviderFor(t, e, name)

				_, err := p.Up(ctx)
				if c.ok {
					if err != nil {
						t.Fatalf("goose up over a version 2 table: %v", err)
					}
					return
				}
				if err == nil {
					t.Fatal("goose up went through over a table that is not version 2")
				}
				if msg := tableNotV2Message(tb); !strings.Contains(err.Error(), msg) {
					t.Errorf("goose up: %v\nwant it to say %q", err, msg)
				}
				if c.view == nil {
					before.checkSame(t, e.DB, tb, "the refused goose up")
				} else if kind, err := relationKind(ctx, e.DB, tb); err != nil || kind != "view" {
					t.Errorf("after the refused goose up, %s is %q (%v); want the view", tb.Name, kind, err)
				}
				for _, st := range ddl.SideTables() {
					side := ddl.Side(tb, st.Suffix)
					if kind, err := relationKind(ctx, e.DB, side); err != nil || kind != "" {
						t.Errorf("the refused goose up left %s %q (%v); want nothing created", side.Name, kind, err)
					}
				}
				if v, err := p.GetDBVersion(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) || v != 0 {
					t.Errorf("goose's version after the refused up: %d (%v); want 0", v, err)
				}
			})
		}
	})
}

// viewOfInstalled replaces the table tb by a view of the same name over
// another, installed, table.
func viewOfInstalled(t *testing.T, e *testdb.Env, tb engine.Table) {
	t.Helper()
	real := tableOf(t, e.Kind, e.Table(t))
	if err := Install(context.Background(), e.DB, real.Name); err != nil {
		t.Fatal(err)
	}
	mustExec(t, e.DB, "DROP TABLE "+tb.Quoted(), "CREATE VIEW "+tb.Quoted()+" AS SELECT * FROM "+real.Quoted())
	t.Cleanup(func() { mustExec(t, e.DB, "DROP VIEW IF EXISTS "+tb.Quoted()) })
}

// TestGooseUpRefusesTakenSideIndexName: on PostgreSQL and SQLite, where
// index names are per schema, the goose file's Up fails, creating
// nothing, when an index of another table holds the name of the unique
// index of <table>_unique, as Install does; it went through, CREATE
// UNIQUE INDEX IF NOT EXISTS doing nothing, and one job per key was not
// enforced.
func TestGooseUpRefusesTakenSideIndexName(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		if e.Kind == engine.MySQL {
			return // index names are per table there
		}
		ctx := context.Background()
		mine := tableOf(t, e.Kind, e.Table(t))
		name := e.Table(t)
		tb := tableOf(t, e.Kind, name)
		side := ddl.Side(tb, "unique")
		index := ddl.IndexName(side, "live_key")
		mustExec(t, e.DB, "CREATE TABLE "+mine.Quoted()+" (x INT)",
			"CREATE INDEX "+ddl.QuoteIdent(e.Kind, index)+" ON "+mine.Quoted()+" (x)")
		p := gooseProviderFor(t, e, name)
		_, err := p.Up(ctx)
		if want := "jobqueue: the index name " + index + " is held by another table"; err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("goose up = %v; want it to say %q", err, want)
		}
		for _, n := range []engine.Table{tb, side} {
			if kind, err := relationKind(ctx, e.DB, n); err != nil || kind != "" {
				t.Errorf("after the refused goose up, %s is %q (%v); want nothing", n.Name, kind, err)
			}
		}
	})
}
