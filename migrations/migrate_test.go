package migrations

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/policy"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMigrateColumnRules migrates a version 1 table holding jobs in every
// status and checks every rule of SPEC section 4, row by row, and the
// catalog afterwards.
func TestMigrateColumnRules(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		table := e.Table(t)
		createV1(t, db, k, table)
		base := time.Now().UTC()
		jobs := v1Fixture(k, base)
		insertV1(t, db, k, table, jobs)
		payloads := payloadTexts(t, db, k, table)

		before := time.Now().UTC()
		if err := Migrate(ctx, db, testPolicy, table); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		after := time.Now().UTC()

		checkMigratedRows(t, db, k, table, jobs, payloads, before, after)
		checkV2Catalog(t, db, k, table)

		// 'expired' is a status the column takes.
		tb := engine.Table{Kind: k, Name: table}
		ph := "?"
		if k == engine.Postgres {
			ph = "$1"
		}
		if _, err := db.ExecContext(ctx, "UPDATE "+tb.Quoted()+" SET status = 'expired' WHERE id = "+ph, jobs[0].ID); err != nil {
			t.Errorf("status 'expired' refused: %v", err)
		}
		// Install accepts the migrated table and changes nothing.
		d1 := dump(t, db, k, table)
		if err := Install(ctx, db, table); err != nil {
			t.Errorf("Install after Migrate: %v", err)
		}
		if diff := cmp.Diff(d1, dump(t, db, k, table)); diff != "" {
			t.Errorf("Install changed the migrated table (-before +after):\n%s", diff)
		}
	})
}

// checkMigratedRows reads the migrated table and compares every row with
// what SPEC section 4 makes of jobs (payloads as the version 1 table
// returned them), for a migration that ran between before and after.
func checkMigratedRows(t *testing.T, db *sql.DB, k engine.Kind, table string, jobs []v1Job, payloads map[int64]string, before, after time.Time) {
	t.Helper()
	got := readV2(t, db, k, table)
	// The migration time is the finished_at of the jobs it fails
	// or expires: read it from the first of them, check it is
	// the time of the call, and use it for every row.
	var now time.Time
	for _, j := range got {
		if j.Status == "expired" && j.FinishedAt != nil {
			now = *j.FinishedAt
			break
		}
	}
	if now.IsZero() {
		t.Fatalf("no job expired by the migration:\n%v", got)
	}
	if now.Before(before.Truncate(time.Second)) || now.After(after) {
		t.Errorf("migration time %v is not between %v and %v", now, before, after)
	}
	var want []v2Job
	for _, j := range jobs {
		p, ok := payloads[j.ID]
		if !ok {
			t.Fatalf("job %d has no payload before the migration", j.ID)
		}
		if !jsonEqual(p, j.Payload) {
			t.Fatalf("job %d: payload %s was written as %s", j.ID, p, j.Payload)
		}
		want = append(want, expectV2(j, k, testPolicy, now, p))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("migrated rows (-want +got):\n%s", diff)
	}

	// Every status of the fixture's outcome is represented.
	seen := map[string]int{}
	for _, j := range got {
		seen[j.Status]++
	}
	for _, s := range []string{"pending", "completed", "failed", "expired"} {
		if seen[s] == 0 {
			t.Errorf("no migrated job is %s: %v", s, seen)
		}
	}
	if seen["in_progress"] != 0 {
		t.Errorf("%d jobs are still in_progress", seen["in_progress"])
	}
}

// checkV2Catalog compares the migrated table's columns and indexes with a
// table Install creates: the same columns (types, NULL, defaults,
// collations), the four indexes with the id tiebreaker, no version 1
// column or index.
func checkV2Catalog(t *testing.T, db *sql.DB, k engine.Kind, table string) {
	t.Helper()
	fresh := testdb.Table(t, db)
	if err := Install(context.Background(), db, fresh); err != nil {
		t.Fatalf("Install: %v", err)
	}
	want, got := readCatalog(t, db, k, fresh), readCatalog(t, db, k, table)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("catalog of the migrated table (-fresh v2 table +migrated):\n%s", diff)
	}
	for _, c := range v1OnlyColumns {
		if _, ok := got.Columns[c]; ok {
			t.Errorf("column %s is still there", c)
		}
	}
	tb := engine.Table{Kind: k, Name: table}
	for _, s := range []string{"type", "locked_at"} {
		if _, ok := got.Indexes[strings.ReplaceAll(tb.IndexName(s), table, "T")]; ok {
			t.Errorf("version 1 index %s is still there", tb.IndexName(s))
		}
	}
	ss := got.Indexes[strings.ReplaceAll(tb.IndexName("status_scheduled"), table, "T")]
	if !slices.Equal(ss.Columns, []string{"status", "scheduled_at", "id"}) {
		t.Errorf("index status_scheduled is on %v", ss.Columns)
	}
	if st, err := inspect(context.Background(), db, tb); err != nil || st != tableV2 {
		t.Errorf("inspect after Migrate: %v, %v; want version 2", st, err)
	}
}

// TestMigrateTwiceChangesNothing runs Migrate on a migrated table: the
// rows and the catalog stay exactly as they were.
func TestMigrateTwiceChangesNothing(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		table := v1Table(t, e, v1Fixture(k, time.Now().UTC()))
		if err := Migrate(ctx, db, testPolicy, table); err != nil {
			t.Fatal(err)
		}
		d1, c1 := dump(t, db, k, table), readCatalog(t, db, k, table)
		// Another policy: a completed migration stores nothing again.
		other := RetryPolicy{MaxAttempts: 9, BaseDelay: time.Second, MaxDelay: 2 * time.Second}
		if err := Migrate(ctx, db, other, table); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		assertSameTable(t, db, k, table, d1, c1, "second Migrate changed rows (-first +second)")
	})
}

// TestMigrateMissingTableInstalls: Migrate on a missing table creates the
// version 2 table, like Install.
func TestMigrateMissingTableInstalls(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		table := e.Table(t)
		if err := Migrate(ctx, db, testPolicy, table); err != nil {
			t.Fatal(err)
		}
		checkV2Catalog(t, db, k, table)
		if n := len(dump(t, db, k, table)); n != 0 {
			t.Errorf("new table has %d rows", n)
		}
	})
}

// TestMigrateEmptyV1Table: a version 1 table without rows converts too.
func TestMigrateEmptyV1Table(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		table := e.Table(t)
		createV1(t, db, k, table)
		if err := Migrate(context.Background(), db, testPolicy, table); err != nil {
			t.Fatal(err)
		}
		checkV2Catalog(t, db, k, table)
	})
}

// errInjected is the failure the interruption tests inject after a step.
var errInjected = errors.New("injected failure after a step")

// TestMigrateInterrupted stops the migration after each of its steps.
// PostgreSQL and SQLite: the version 1 table is left exactly as it was.
// MySQL: Install refuses the half-migrated table. On every engine, running
// Migrate again with the same policy ends with the same table as an
// uninterrupted migration of the same rows at the same time.
func TestMigrateInterrupted(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		base := time.Now().UTC()
		jobs := v1Fixture(k, base)
		clock := func() time.Time { return base.Add(time.Minute) }

		// The reference: an uninterrupted migration, counting steps.
		ref := v1Table(t, e, jobs)
		steps := 0
		err := migrate(ctx, db, testPolicy, ref, migrateOptions{now: clock, afterStep: func(n int, _ string) error {
			steps = n
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if steps < 3 {
			t.Fatalf("the migration ran %d steps", steps)
		}
		wantRows, wantCat := dump(t, db, k, ref), readCatalog(t, db, k, ref)

		if k == engine.MySQL {
			// MySQL converts the rows in batches of ids, each
			// committing on its own: stop after the third of them.
			t.Run("mid_conversion", func(t *testing.T) {
				table := v1Table(t, e, jobs)
				batches := 0
				err := migrate(ctx, db, testPolicy, table, migrateOptions{now: clock, mysqlBatchIDs: 10, afterBatch: func(n int) error {
					batches = n
					if n == 3 {
						return errInjected
					}
					return nil
				}})
				if !errors.Is(err, errInjected) || batches != 3 {
					t.Fatalf("migrate = %v after %d batches, want the injected failure after 3", err, batches)
				}
				var done, todo int
				if err := db.QueryRowContext(ctx, "SELECT SUM(attempts IS NOT NULL), SUM(attempts IS NULL) FROM `"+table+"`").Scan(&done, &todo); err != nil {
					t.Fatal(err)
				}
				if done == 0 || todo == 0 {
					t.Fatalf("%d rows converted, %d not: want some of each", done, todo)
				}
				if err := Install(ctx, db, table); !errors.Is(err, ErrOutdatedTable) {
					t.Errorf("Install on the half-converted table = %v, want ErrOutdatedTable", err)
				}
				if err := migrate(ctx, db, testPolicy, table, migrateOptions{now: clock, mysqlBatchIDs: 10}); err != nil {
					t.Fatalf("Migrate again: %v", err)
				}
				assertSameTable(t, db, k, table, wantRows, wantCat, "rows after the second run (-uninterrupted +interrupted)")
			})
		}
		for stop := 1; stop <= steps; stop++ {
			t.Run(fmt.Sprintf("after_step_%d", stop), func(t *testing.T) {
				table := v1Table(t, e, jobs)
				v1Rows, v1Cat := dump(t, db, k, table), readCatalog(t, db, k, table)
				err := migrate(ctx, db, testPolicy, table, migrateOptions{now: clock, afterStep: func(n int, _ string) error {
					if n == stop {
						return errInjected
					}
					return nil
				}})
				if !errors.Is(err, errInjected) {
					t.Fatalf("migrate = %v, want the injected failure", err)
				}
				if k == engine.MySQL {
					st, err := inspect(ctx, db, engine.Table{Kind: k, Name: table})
					if err != nil {
						t.Fatal(err)
					}
					if st != tableV2 {
						if err := Install(ctx, db, table); !errors.Is(err, ErrOutdatedTable) {
							t.Errorf("Install on the table left after step %d (%s) = %v, want ErrOutdatedTable", stop, st, err)
						}
					}
				} else {
					assertSameTable(t, db, k, table, v1Rows, v1Cat, "rows after a failed migration (-v1 +now)")
					if err := Install(ctx, db, table); !errors.Is(err, ErrOutdatedTable) {
						t.Errorf("Install on the rolled back table = %v, want ErrOutdatedTable", err)
					}
				}
				if err := migrate(ctx, db, testPolicy, table, migrateOptions{now: clock}); err != nil {
					t.Fatalf("Migrate again: %v", err)
				}
				assertSameTable(t, db, k, table, wantRows, wantCat, "rows after the second run (-uninterrupted +interrupted)")
			})
		}
	})
}

// TestMigrateBadInput: a bad policy, a bad table name or an unsupported
// database is an error wrapping its sentinel, and nothing is written.
func TestMigrateBadInput(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		v1 := v1Table(t, e, v1Fixture(k, time.Now().UTC())[:5])
		rows, cat := dump(t, db, k, v1), readCatalog(t, db, k, v1)
		missing := e.Table(t)
		cases := []struct {
			name   string
			policy RetryPolicy
			table  string
			want   error
		}{
			{"zero policy", RetryPolicy{}, v1, policy.ErrInvalidPolicy},
			{"no attempts", RetryPolicy{MaxAttempts: 0, BaseDelay: time.Second, MaxDelay: time.Second}, v1, policy.ErrInvalidPolicy},
			{"negative delay", RetryPolicy{MaxAttempts: 3, BaseDelay: -time.Second, MaxDelay: time.Minute}, v1, policy.ErrInvalidPolicy},
			{"fractional delay", RetryPolicy{MaxAttempts: 3, BaseDelay: 1500 * time.Millisecond, MaxDelay: time.Minute}, v1, policy.ErrInvalidPolicy},
			// base_delay is an INT column: a base delay past 2^31-1 seconds
			// would overflow it on PostgreSQL (after MySQL's first steps
			// had committed) or be stored as a value the queue cannot read.
			{"base delay too long for the column", RetryPolicy{MaxAttempts: 3, BaseDelay: 3_000_000_000 * time.Second, MaxDelay: time.Hour}, v1, policy.ErrInvalidPolicy},
			{"bad policy, missing table", RetryPolicy{MaxAttempts: 3}, missing, policy.ErrInvalidPolicy},
			{"injection", testPolicy, v1 + "; DROP TABLE x", ErrInvalidTableName},
			{"empty name", testPolicy, "", ErrInvalidTableName},
			{"leading digit", testPolicy, "1jobs", ErrInvalidTableName},
			{"too long", testPolicy, strings.Repeat("j", 65), ErrInvalidTableName},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if err := Migrate(ctx, db, c.policy, c.table); !errors.Is(err, c.want) {
					t.Errorf("Migrate = %v, want %v", err, c.want)
				}
			})
		}
		assertSameTable(t, db, k, v1, rows, cat, "rows changed (-before +after)")
		if st, err := inspect(ctx, db, engine.Table{Kind: k, Name: missing}); err != nil || st != tableMissing {
			t.Errorf("table %s is %v (%v) after a refused Migrate; want missing", missing, st, err)
		}
	})
}

// otherDriver is a database/sql driver jobqueue does not support; Migrate
// must refuse it without opening a connection.
type otherDriver struct{}

func (otherDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("otherDriver: Migrate must not connect")
}

type otherConnector struct{}

func (otherConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("otherDriver: Migrate must not connect")
}
func (otherConnector) Driver() driver.Driver { return otherDriver{} }

func TestMigrateUnsupportedDatabase(t *testing.T) {
	t.Parallel()
	db := sql.OpenDB(otherConnector{})
	defer db.Close()
	for _, d := range []*sql.DB{db, nil} {
		if err := Migrate(context.Background(), d, testPolicy, "jobs"); !errors.Is(err, ErrUnsupportedDatabase) {
			t.Errorf("Migrate on %v = %v, want ErrUnsupportedDatabase", d, err)
		}
	}
}
