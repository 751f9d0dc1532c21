package migrations

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// A service whose `goose up` meets a version 1 table converts it with the
// policy it gave GooseMigrations (the conversion itself is tested with
// Migrate).
func TestGooseMigrationsConvertVersion1Table(t *testing.T) {
	t.Parallel()
	for _, k := range testdb.Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.Open(t, k)
			name, versions := testdb.Table(t, db), testdb.Table(t, db)
			tb := tableOf(t, k, name)
			mustExec(t, db, append(v1DDL(tb), v1Rows(tb))...)

			p := RetryPolicy{MaxAttempts: 5, BaseDelay: 2 * time.Minute, MaxDelay: 2 * time.Hour}
			ms, err := GooseMigrations(db, name, p, 7)
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
			if _, err := prov.Up(ctx); err != nil {
				t.Fatalf("goose up on a version 1 table: %v", err)
			}
			if st, err := inspect(ctx, db, tb); err != nil || st != tableV2 {
				t.Fatalf("after goose up the table is %v (%v); want version 2", st, err)
			}
			if diff := cmp.Diff(wantIndexes(k, name), testIndexes(t, db, tb)); diff != "" {
				t.Errorf("indexes after goose up (-want +got):\n%s", diff)
			}
			rows, err := db.QueryContext(ctx, `SELECT max_attempts, base_delay, max_delay FROM `+tb.Quoted())
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var ma, bd, md int
				if err := rows.Scan(&ma, &bd, &md); err != nil {
					t.Fatal(err)
				}
				if ma != 5 || bd != 120 || md != 7200 {
					t.Errorf("stored policy %d/%d/%d, want 5/120/7200", ma, bd, md)
				}
				n++
			}
			if n != 3 {
				t.Errorf("%d jobs after goose up, want 3", n)
			}
			if v, err := prov.GetDBVersion(ctx); err != nil || v != 7 {
				t.Errorf("goose version %d (%v), want 7", v, err)
			}
		})
	}
}
