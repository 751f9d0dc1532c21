package migrations

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// Given no retry policy, GooseMigrations' migration refuses a version 1
// table and leaves it as it was, so that a service's `goose up` never
// stores a policy nobody chose. (With a policy it converts the table:
// TestGooseMigrationsMigratesV1.)
func TestGooseMigrationsWithoutPolicyRefuseVersion1Table(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		name, versions := e.Table(t), e.Table(t)
		tb := tableOf(t, k, name)
		mustExec(t, db, append(v1DDL(tb), v1Rows(tb))...)
		before := imageOf(t, db, tb)

		ms, err := GooseMigrations(db, name, RetryPolicy{}, 7)
		if err != nil {
			t.Fatal(err)
		}
		dialect, err := gooseDialect(k)
		if err != nil {
			t.Fatal(err)
		}
		prov, err := goose.NewProvider(dialect, db, nil, goose.WithGoMigrations(ms...),
			goose.WithTableName(versions), goose.WithDisableGlobalRegistry(true))
		if err != nil {
			t.Fatal(err)
		}
		_, err = prov.Up(ctx)
		if !errors.Is(err, ErrOutdatedTable) || !strings.Contains(err.Error(), "Migrate") || !strings.Contains(err.Error(), "no retry policy") {
			t.Fatalf("goose up without a policy on a version 1 table: %v; want ErrOutdatedTable naming Migrate and the missing policy", err)
		}
		before.checkSame(t, db, tb, "the refused goose up")
		if v, err := prov.GetDBVersion(ctx); err != nil || v != 0 {
			t.Errorf("goose version %d (%v) after the refusal, want 0", v, err)
		}
	})
}
