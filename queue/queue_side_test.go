package queue

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
)

// TestNewChecksTheSideTables: New refuses a table whose side table's name
// (<table>_unique, <table>_leader) is held by a table that is not that side
// table (a user's table, or another queue's jobs table), rather than let
// keyed enqueues write into it or the worker's leadership fail at every
// turn; a side table that is missing (a table installed before it) is
// still accepted, as before, and reported when a call needs it.
func TestNewChecksTheSideTables(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		db := testdb.Open(t, kind)
		cases := []struct {
			name string
			// replace returns the statements that put something else
			// under the side table's name side (quoted).
			suffix  string
			replace func(t *testing.T, tbl engine.Table, side string) []string
			wantErr bool
		}{
			{name: "user table with the key columns and one more", suffix: "unique", wantErr: true,
				replace: func(_ *testing.T, _ engine.Table, side string) []string {
					return []string{"CREATE TABLE " + side + " (job_id BIGINT PRIMARY KEY, unique_key VARCHAR(255) NOT NULL, live_key VARCHAR(255) NULL, held_until TIMESTAMP NULL, note VARCHAR(20) NULL)"}
				}},
			{name: "user table with other columns", suffix: "leader", wantErr: true,
				replace: func(_ *testing.T, _ engine.Table, side string) []string {
					return []string{"CREATE TABLE " + side + " (name VARCHAR(64) PRIMARY KEY, holder VARCHAR(255) NOT NULL)"}
				}},
			{name: "another queue's jobs table", suffix: "unique", wantErr: true,
				replace: func(t *testing.T, tbl engine.Table, _ string) []string {
					t.Cleanup(func() { testdb.Drop(t, db, tbl.Name+"_unique") })
					if err := migrations.Install(ctx, db, tbl.Name+"_unique"); err != nil {
						t.Fatal(err)
					}
					return nil
				}},
			{name: "missing (installed before it)", suffix: "leader"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				tbl, err := engine.ParseTable(kind, testdb.Table(t, db))
				if err != nil {
					t.Fatal(err)
				}
				if err := migrations.Install(ctx, db, tbl.Name); err != nil {
					t.Fatal(err)
				}
				side := engine.Table{Kind: kind, Name: tbl.Name + "_" + c.suffix}
				if _, err := db.ExecContext(ctx, "DROP TABLE "+side.Quoted()); err != nil {
					t.Fatal(err)
				}
				if c.replace != nil {
					for _, s := range c.replace(t, tbl, side.Quoted()) {
						if _, err := db.ExecContext(ctx, s); err != nil {
							t.Fatalf("%s: %v", s, err)
						}
					}
				}
				q, err := New(db, WithTable(tbl.Name))
				if !c.wantErr {
					if err != nil {
						t.Fatalf("New with %s missing: %v", side.Name, err)
					}
					if err := q.Close(); err != nil {
						t.Fatal(err)
					}
					return
				}
				if !errors.Is(err, ErrForeignTable) || q != nil {
					if q != nil {
						if _, eerr := q.Enqueue(ctx, testArgs{N: 1}, UniqueKey("k")); eerr == nil {
							t.Errorf("a keyed enqueue went through with %s not jobqueue's", side.Name)
						}
					}
					t.Fatalf("New: queue %v, error %v; want an error wrapping ErrForeignTable", q != nil, err)
				}
				for _, s := range []string{side.Name, "rename", "another table name"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
			})
		}
	})
}
