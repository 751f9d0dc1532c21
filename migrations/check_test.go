package migrations

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestCheck: Check tells a usable version 2 table from a missing, version
// 1, half-migrated or foreign one, on every engine, and changes nothing.
func TestCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, db *sql.DB, tb engine.Table)
		is    error  // the sentinel the error wraps (ErrOutdatedTable, ErrTableMissing, ErrForeignTable); nil for none
		want  string // a substring of the error; "" for none
	}{
		{"version 2", func(t *testing.T, db *sql.DB, tb engine.Table) {
			if err := Install(context.Background(), db, tb.Name); err != nil {
				t.Fatal(err)
			}
		}, nil, ""},
		{"version 2 without an index", func(t *testing.T, db *sql.DB, tb engine.Table) {
			if err := Install(context.Background(), db, tb.Name); err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, dropIndexSQL(tb, tb.IndexName("lease_until")))
		}, nil, ""},
		{"missing", func(*testing.T, *sql.DB, engine.Table) {}, ErrTableMissing, "does not exist"},
		{"version 1", func(t *testing.T, db *sql.DB, tb engine.Table) {
			mustExec(t, db, append(v1DDL(tb), v1Rows(tb))...)
		}, ErrOutdatedTable, "Migrate"},
		{"half migrated", func(t *testing.T, db *sql.DB, tb engine.Table) {
			if err := Install(context.Background(), db, tb.Name); err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, "ALTER TABLE "+tb.Quoted()+" ADD COLUMN locked_at TIMESTAMP NULL")
		}, ErrOutdatedTable, "interrupted"},
		{"foreign", func(t *testing.T, db *sql.DB, tb engine.Table) {
			mustExec(t, db, "CREATE TABLE "+tb.Quoted()+" (id INT PRIMARY KEY, queue VARCHAR(20), attempts INT)")
		}, ErrForeignTable, "not a jobqueue table"},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				k, db := e.Kind, e.DB
				name := e.Table(t)
				tb := tableOf(t, k, name)
				c.setup(t, db, tb)
				if c.name == "missing" {
					err := Check(context.Background(), db, name)
					if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, c.is) || errors.Is(err, ErrOutdatedTable) {
						t.Errorf("Check = %v, want an error wrapping %v, containing %q", err, c.is, c.want)
					}
					if st, err := inspect(context.Background(), db, tb); err != nil || st != tableMissing {
						t.Errorf("after Check the table is %v (%v), want missing", st, err)
					}
					return
				}
				before := takeSnapshot(t, db, tb)
				err := Check(context.Background(), db, name)
				switch {
				case c.want == "" && err != nil:
					t.Fatalf("Check = %v, want nil", err)
				case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
					t.Fatalf("Check = %v, want an error containing %q", err, c.want)
				}
				for _, sentinel := range []error{ErrOutdatedTable, ErrTableMissing, ErrForeignTable} {
					if got, want := errors.Is(err, sentinel), sentinel == c.is; got != want {
						t.Errorf("Check = %v: errors.Is(%v) = %v, want %v", err, sentinel, got, want)
					}
				}
				if diff := cmp.Diff(before, takeSnapshot(t, db, tb)); diff != "" {
					t.Errorf("Check changed the table (-before +after):\n%s", diff)
				}
			})
		}
	})
}

func TestCheckRejectsBadInput(t *testing.T) {
	t.Parallel()
	t.Run("nil db", func(t *testing.T) {
		if err := Check(context.Background(), nil, "jobs"); !errors.Is(err, ErrUnsupportedDatabase) {
			t.Errorf("Check on a nil db = %v, want ErrUnsupportedDatabase", err)
		}
	})
	testdb.ForEachKind(t, func(t *testing.T, k engine.Kind) {
		db := closedDB(t, k)
		// The control: with a valid name the closed database is reached.
		if err := Check(context.Background(), db, "jobs"); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("Check on a closed database with a valid name: %v; want a 'closed' error", err)
		}
		if err := Check(context.Background(), db, "a-b"); !errors.Is(err, ErrInvalidTableName) {
			t.Errorf("Check with a bad name = %v, want ErrInvalidTableName", err)
		}
	})
}
