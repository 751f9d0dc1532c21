package migrations_test

import (
	"context"
	"errors"
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
