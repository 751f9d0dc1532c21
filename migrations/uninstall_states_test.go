package migrations

import (
	"context"
	"errors"
	"testing"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestUninstallStates: Uninstall on a table of each other state than
// version 2 (TestUninstall). A table of the name that is not a jobqueue
// table is refused with ErrForeignTable and keeps its rows; a version 1
// table is dropped with its jobs; the side tables left by a jobs table
// dropped by hand go.
func TestUninstallStates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, e *testdb.Env, tb engine.Table)
		is    error // the sentinel Uninstall's error wraps; nil: it succeeds
	}{
		{"foreign", func(t *testing.T, e *testdb.Env, tb engine.Table) {
			mustExec(t, e.DB, "CREATE TABLE "+tb.Quoted()+" (id INT PRIMARY KEY, note VARCHAR(20))",
				"INSERT INTO "+tb.Quoted()+" (id, note) VALUES (1, 'keep me')")
		}, ErrForeignTable},
		{"version 1", func(t *testing.T, e *testdb.Env, tb engine.Table) {
			mustExec(t, e.DB, append(v1DDL(tb), v1Rows(tb))...)
		}, nil},
		{"side tables left over", func(t *testing.T, e *testdb.Env, tb engine.Table) {
			if err := Install(context.Background(), e.DB, tb.Name); err != nil {
				t.Fatal(err)
			}
			mustExec(t, e.DB, "DROP TABLE "+tb.Quoted())
		}, nil},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				tb := tableOf(t, e.Kind, e.Table(t))
				c.setup(t, e, tb)
				err := Uninstall(ctx, e.DB, tb.Name)
				if c.is == nil && err != nil || c.is != nil && !errors.Is(err, c.is) {
					t.Fatalf("Uninstall = %v, want %v", err, c.is)
				}
				if c.is != nil {
					var note string
					if err := e.DB.QueryRowContext(ctx, "SELECT note FROM "+tb.Quoted()+" WHERE id = 1").Scan(&note); err != nil || note != "keep me" {
						t.Errorf("the refused table's row: %q, %v; want it kept", note, err)
					}
					return
				}
				for _, o := range ddl.Objects(tb) {
					if _, err := e.DB.ExecContext(ctx, "SELECT 1 FROM "+o.Table.Quoted()+" WHERE 1 = 0"); o.Drop != "" && err == nil {
						t.Errorf("%s %s is still there after Uninstall", o.Kind, o.Name)
					}
				}
			})
		}
	})
}
