package migrations

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestGooseMigrationsMigratesV1: a service's own `goose up` that includes
// GooseMigrations converts a version 1 table with the given policy, exactly
// as Migrate does, and records its version so that the next `goose up` does
// nothing.
func TestGooseMigrationsMigratesV1(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		table := e.Table(t)
		versions := e.Table(t) // the service's goose version table
		createV1(t, db, k, table)
		jobs := v1Fixture(k, time.Now().UTC())
		insertV1(t, db, k, table, jobs)
		payloads := payloadTexts(t, db, k, table)

		ms, err := GooseMigrations(db, table, testPolicy, 20260101000000)
		if err != nil {
			t.Fatal(err)
		}
		dialect, err := gooseDialect(k)
		if err != nil {
			t.Fatal(err)
		}
		p, err := goose.NewProvider(dialect, db, nil,
			goose.WithGoMigrations(ms...), goose.WithDisableGlobalRegistry(true), goose.WithTableName(versions))
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now().UTC()
		res, err := p.Up(ctx)
		if err != nil {
			t.Fatalf("goose up: %v", err)
		}
		after := time.Now().UTC()
		if len(res) != 1 {
			t.Fatalf("goose up applied %d migrations, want 1", len(res))
		}
		checkMigratedRows(t, db, k, table, jobs, payloads, before, after)
		checkV2Catalog(t, db, k, table)

		d1 := dump(t, db, k, table)
		res, err = p.Up(ctx)
		if err != nil || len(res) != 0 {
			t.Fatalf("second goose up: %d applied, %v; want nothing to do", len(res), err)
		}
		if diff := cmp.Diff(d1, dump(t, db, k, table)); diff != "" {
			t.Errorf("second goose up changed rows:\n%s", diff)
		}
		if st, err := inspect(ctx, db, engine.Table{Kind: k, Name: table}); err != nil || st != tableV2 {
			t.Errorf("inspect: %v %v", st, err)
		}
	})
}
