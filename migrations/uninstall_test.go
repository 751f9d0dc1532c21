package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
)

// TestUninstall: Uninstall removes the table and every side table Install
// created, runs again without error, and Install afterwards makes a table
// the queue can use; a bad name is refused before any SQL.
func TestUninstall(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		name := e.Table(t)
		if err := migrations.Install(ctx, e.DB, name); err != nil {
			t.Fatal(err)
		}
		if err := migrations.Uninstall(ctx, e.DB, name); err != nil {
			t.Fatal(err)
		}
		tbl, err := engine.ParseTable(e.Kind, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ddl.Objects(tbl) {
			if o.Drop == "" {
				continue
			}
			// Selecting from a dropped table fails on every engine.
			if _, err := e.DB.ExecContext(ctx, "SELECT 1 FROM "+o.Table.Quoted()+" WHERE 1 = 0"); err == nil {
				t.Errorf("%s %s is still there after Uninstall", o.Kind, o.Name)
			}
		}
		if err := migrations.Check(ctx, e.DB, name); err == nil {
			t.Error("Check accepts the uninstalled table")
		}
		if err := migrations.Uninstall(ctx, e.DB, name); err != nil {
			t.Errorf("second Uninstall: %v", err)
		}
		if err := migrations.Install(ctx, e.DB, name); err != nil {
			t.Fatal(err)
		}
		if err := migrations.Check(ctx, e.DB, name); err != nil {
			t.Errorf("Check after Install again: %v", err)
		}
		if err := migrations.Uninstall(ctx, e.DB, "bad-name"); !errors.Is(err, migrations.ErrInvalidTableName) {
			t.Errorf("Uninstall(bad-name) = %v, want ErrInvalidTableName", err)
		}
	})
}

// TestUninstallStates: Uninstall on a table of each other state. A table
// of the name that is not a jobqueue table is refused with
// ErrForeignTable and keeps its rows; a version 1 table is dropped with its
// jobs; the side tables left by a jobs table dropped by hand go.
func TestUninstallStates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, e *testdb.Env, tbl engine.Table)
		is    error // the sentinel Uninstall's error wraps; nil: it succeeds
		gone  bool  // every object of the table is gone afterwards
	}{
		{"foreign", func(t *testing.T, e *testdb.Env, tbl engine.Table) {
			mustExecAll(t, e.DB, "CREATE TABLE "+tbl.Quoted()+" (id INT PRIMARY KEY, note VARCHAR(20))",
				"INSERT INTO "+tbl.Quoted()+" (id, note) VALUES (1, 'keep me')")
		}, migrations.ErrForeignTable, false},
		{"version 1", func(t *testing.T, e *testdb.Env, tbl engine.Table) {
			ddl, err := os.ReadFile(filepath.Join("testdata", "v1_"+string(e.Kind)+".sql"))
			if err != nil {
				t.Fatal(err)
			}
			var lines []string // the file without its comment lines, which hold semicolons
			for _, l := range strings.Split(strings.ReplaceAll(string(ddl), "{{table}}", tbl.Name), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "--") {
					lines = append(lines, l)
				}
			}
			mustExecAll(t, e.DB, strings.Split(strings.Join(lines, "\n"), ";")...)
		}, nil, true},
		{"side tables left over", func(t *testing.T, e *testdb.Env, tbl engine.Table) {
			if err := migrations.Install(context.Background(), e.DB, tbl.Name); err != nil {
				t.Fatal(err)
			}
			mustExecAll(t, e.DB, "DROP TABLE "+tbl.Quoted())
		}, nil, true},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				tbl, err := engine.ParseTable(e.Kind, e.Table(t))
				if err != nil {
					t.Fatal(err)
				}
				c.setup(t, e, tbl)
				err = migrations.Uninstall(ctx, e.DB, tbl.Name)
				if c.is == nil && err != nil || c.is != nil && !errors.Is(err, c.is) {
					t.Fatalf("Uninstall = %v, want %v", err, c.is)
				}
				if c.gone {
					for _, o := range ddl.Objects(tbl) {
						if _, err := e.DB.ExecContext(ctx, "SELECT 1 FROM "+o.Table.Quoted()+" WHERE 1 = 0"); o.Drop != "" && err == nil {
							t.Errorf("%s %s is still there after Uninstall", o.Kind, o.Name)
						}
					}
					return
				}
				var note string
				if err := e.DB.QueryRowContext(ctx, "SELECT note FROM "+tbl.Quoted()+" WHERE id = 1").Scan(&note); err != nil || note != "keep me" {
					t.Errorf("the refused table's row: %q, %v; want it kept", note, err)
				}
			})
		}
	})
}

// mustExecAll runs each non-blank statement on db.
func mustExecAll(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if strings.TrimSpace(s) == "" {
			continue
		}
		if _, err := db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
}
