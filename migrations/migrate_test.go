package migrations

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
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
		table := e.Table(t)
		createV1(t, db, k, table)
		insertV1(t, db, k, table, v1Fixture(k, time.Now().UTC()))
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
		ref := e.Table(t)
		createV1(t, db, k, ref)
		insertV1(t, db, k, ref, jobs)
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
				table := e.Table(t)
				createV1(t, db, k, table)
				insertV1(t, db, k, table, jobs)
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
				table := e.Table(t)
				createV1(t, db, k, table)
				insertV1(t, db, k, table, jobs)
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
		v1 := e.Table(t)
		createV1(t, db, k, v1)
		insertV1(t, db, k, v1, v1Fixture(k, time.Now().UTC())[:5])
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

// TestMigrateKeepsExtraColumns: a column the user added to the version 1
// table, and an index on it, are still there with their values.
func TestMigrateKeepsExtraColumns(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		table := e.Table(t)
		tb := engine.Table{Kind: k, Name: table}
		createV1(t, db, k, table)
		jobs := v1Fixture(k, time.Now().UTC())[:6]
		insertV1(t, db, k, table, jobs)
		idx := "idx_" + table + "_tenant"
		for _, q := range []string{
			"ALTER TABLE " + tb.Quoted() + " ADD COLUMN tenant VARCHAR(32) NOT NULL DEFAULT 'acme'",
			"UPDATE " + tb.Quoted() + " SET tenant = 'globex' WHERE id = " + fmt.Sprint(jobs[1].ID),
			"CREATE INDEX " + ddl.QuoteIdent(k, idx) + " ON " + tb.Quoted() + " (tenant)",
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if err := Migrate(ctx, db, testPolicy, table); err != nil {
			t.Fatal(err)
		}
		rows, err := db.QueryContext(ctx, "SELECT id, tenant FROM "+tb.Quoted()+" ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[int64]string{}
		for rows.Next() {
			var id int64
			var tenant string
			if err := rows.Scan(&id, &tenant); err != nil {
				t.Fatal(err)
			}
			got[id] = tenant
		}
		want := map[int64]string{}
		for i, j := range jobs {
			want[j.ID] = "acme"
			if i == 1 {
				want[j.ID] = "globex"
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tenant column (-want +got):\n%s", diff)
		}
		ix, err := indexes(ctx, db, tb)
		if err != nil {
			t.Fatal(err)
		}
		name := idx
		if k == engine.MySQL {
			name = idx // MySQL keeps the name as given
		}
		if !slices.Equal(ix[name].Columns, []string{"tenant"}) {
			t.Errorf("index on tenant: %+v (all: %v)", ix[name], sortedKeys(ix))
		}
		if st, err := inspect(ctx, db, tb); err != nil || st != tableV2 {
			t.Errorf("inspect: %v %v", st, err)
		}
	})
}

// mysqlURLWithParam adds a DSN parameter to the MySQL test URL.
func mysqlURLWithParam(t *testing.T, key, value string) string {
	u, err := url.Parse(testdb.URL(t, engine.MySQL))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// checkCreatedAtKept migrates a version 1 MySQL table through db (whose
// sessions are not UTC) and checks that created_at, a TIMESTAMP, becomes a
// DATETIME holding each job's instant as a UTC wall clock.
func checkCreatedAtKept(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	var tz string
	if err := db.QueryRowContext(ctx, "SELECT @@session.time_zone").Scan(&tz); err != nil {
		t.Fatal(err)
	}
	if tz != "+03:00" {
		t.Fatalf("session time zone is %q; the test needs +03:00", tz)
	}
	table := testdb.Table(t, db)
	createV1(t, db, engine.MySQL, table)
	jobs := v1Fixture(engine.MySQL, time.Now().UTC())
	insertV1(t, db, engine.MySQL, table, jobs)
	if err := Migrate(ctx, db, testPolicy, table); err != nil {
		t.Fatal(err)
	}
	got := readV2(t, db, engine.MySQL, table)
	if len(got) != len(jobs) {
		t.Fatalf("%d rows after the migration, want %d", len(got), len(jobs))
	}
	for i, j := range jobs {
		if !got[i].CreatedAt.Equal(j.CreatedAt) {
			t.Errorf("job %d: created_at %v, want %v (the instant moved by %v)", j.ID, got[i].CreatedAt, j.CreatedAt, got[i].CreatedAt.Sub(j.CreatedAt))
		}
		if !got[i].ScheduledAt.Equal(j.ScheduledAt) && j.Status != "in_progress" {
			t.Errorf("job %d: scheduled_at %v, want %v", j.ID, got[i].ScheduledAt, j.ScheduledAt)
		}
	}
	cols, err := columns(ctx, db, engine.Table{Kind: engine.MySQL, Name: table})
	if err != nil {
		t.Fatal(err)
	}
	if c := cols["created_at"]; c.Type != "datetime" || c.Nullable {
		t.Errorf("created_at is %+v, want DATETIME NOT NULL", c)
	}
	// The session's time zone is the pool's again.
	if err := db.QueryRowContext(ctx, "SELECT @@session.time_zone").Scan(&tz); err != nil || tz != "+03:00" {
		t.Errorf("session time zone after Migrate: %q, %v", tz, err)
	}
}

// TestMigrateMySQLSessionTimeZone: the session's time zone (set by the DSN)
// is +03:00.
func TestMigrateMySQLSessionTimeZone(t *testing.T) {
	t.Parallel()
	db := testdb.OpenURL(t, mysqlURLWithParam(t, "time_zone", "'+03:00'"))
	checkCreatedAtKept(t, db)
}

// TestMigrateMySQLGlobalTimeZone: the server's time zone is +03:00 (SET
// GLOBAL, restored at the end). It changes a server setting, so it does
// not run in parallel with this package's other tests (Go runs them after
// the sequential ones).
func TestMigrateMySQLGlobalTimeZone(t *testing.T) {
	ctx := context.Background()
	admin := testdb.Open(t, engine.MySQL)
	var prev string
	if err := admin.QueryRowContext(ctx, "SELECT @@global.time_zone").Scan(&prev); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(ctx, "SET GLOBAL time_zone = '+03:00'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "SET GLOBAL time_zone = ?", prev); err != nil {
			t.Errorf("restore the global time zone to %q: %v", prev, err)
		}
	})
	// A dedicated pool: its connections start after SET GLOBAL.
	db := testdb.OpenURL(t, testdb.URL(t, engine.MySQL))
	checkCreatedAtKept(t, db)
}

// TestMigrateMySQLOneConnection: with a pool of one connection goose runs
// the migration in its transaction on that connection (RunDB would wait for
// a second one forever, until the test binary's timeout); the session's
// time zone is set and restored there.
func TestMigrateMySQLOneConnection(t *testing.T) {
	t.Parallel()
	db := testdb.OpenURL(t, mysqlURLWithParam(t, "time_zone", "'+03:00'"))
	db.SetMaxOpenConns(1)
	checkCreatedAtKept(t, db)
}

// TestMigrateKeepsIDCounter: ids are never reused. The job with the highest
// id was deleted before the migration; a job inserted after it gets a
// higher id still (SQLite's rebuild carries the AUTOINCREMENT counter over).
func TestMigrateKeepsIDCounter(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		table := e.Table(t)
		tb := engine.Table{Kind: k, Name: table}
		createV1(t, db, k, table)
		jobs := v1Fixture(k, time.Now().UTC())
		insertV1(t, db, k, table, jobs)
		last := jobs[len(jobs)-1].ID
		if _, err := db.ExecContext(ctx, "DELETE FROM "+tb.Quoted()+" WHERE id = "+fmt.Sprint(last)); err != nil {
			t.Fatal(err)
		}
		if err := Migrate(ctx, db, testPolicy, table); err != nil {
			t.Fatal(err)
		}
		ins := "INSERT INTO " + tb.Quoted() + " (name, payload, status, attempts, max_attempts, base_delay, max_delay, scheduled_at, created_at) VALUES ('new', '{}', 'pending', 0, 3, 60, 3600, '2030-01-01 00:00:00.000000', '2030-01-01 00:00:00.000000')"
		if k == engine.MySQL {
			ins = strings.ReplaceAll(ins, ".000000", "")
		}
		if _, err := db.ExecContext(ctx, ins); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := db.QueryRowContext(ctx, "SELECT max(id) FROM "+tb.Quoted()).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Errorf("new job got id %d; ids up to %d were used before the migration", id, last)
		}
	})
}

// TestMigrateConcurrent: two Migrate calls at once (say, from two deploy
// jobs) wait for each other; the rows are converted once.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		table := e.Table(t)
		createV1(t, db, k, table)
		jobs := v1Fixture(k, time.Now().UTC())
		insertV1(t, db, k, table, jobs)
		payloads := payloadTexts(t, db, k, table)
		before := time.Now().UTC()
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- Migrate(ctx, db, testPolicy, table) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("Migrate: %v", err)
			}
		}
		checkMigratedRows(t, db, k, table, jobs, payloads, before, time.Now().UTC())
	})
}

// TestMigrateSQLiteViewsAndTriggers: SQLite rebuilds the table; the views
// and triggers that name it are recreated, and one that uses a column
// version 2 drops makes the migration fail with nothing changed.
func TestMigrateSQLiteViewsAndTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, engine.SQLite)
	table := testdb.Table(t, db)
	q := engine.Table{Kind: engine.SQLite, Name: table}.Quoted()
	createV1(t, db, engine.SQLite, table)
	jobs := v1Fixture(engine.SQLite, time.Now().UTC())
	insertV1(t, db, engine.SQLite, table, jobs)
	for _, s := range []string{
		"CREATE TABLE audit (job_id INTEGER, note TEXT)",
		"CREATE VIEW named_jobs AS SELECT id, name FROM " + q,
		"CREATE TRIGGER audit_insert AFTER INSERT ON " + q + " BEGIN INSERT INTO audit VALUES (new.id, new.name); END",
		"CREATE VIEW retries AS SELECT id, retry_count FROM " + q,
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	rows, cat := dump(t, db, engine.SQLite, table), readCatalog(t, db, engine.SQLite, table)
	err := Migrate(ctx, db, testPolicy, table)
	if err == nil || !strings.Contains(err.Error(), "view retries") {
		t.Fatalf("Migrate with a view on retry_count = %v; want an error naming the view", err)
	}
	if diff := cmp.Diff(rows, dump(t, db, engine.SQLite, table)); diff != "" {
		t.Errorf("rows after the failed migration:\n%s", diff)
	}
	if diff := cmp.Diff(cat, readCatalog(t, db, engine.SQLite, table)); diff != "" {
		t.Errorf("catalog after the failed migration:\n%s", diff)
	}
	if _, err := db.ExecContext(ctx, "DROP VIEW retries"); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, db, testPolicy, table); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM named_jobs").Scan(&n); err != nil || n != len(jobs) {
		t.Errorf("view named_jobs: %d rows, %v; want %d", n, err, len(jobs))
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO "+q+" (name, payload, max_attempts, base_delay, max_delay, scheduled_at, created_at) VALUES ('x', '{}', 1, 1, 1, '2030-01-01 00:00:00.000000', '2030-01-01 00:00:00.000000')"); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM audit WHERE note = 'x'").Scan(&n); err != nil || n != 1 {
		t.Errorf("trigger audit_insert: %d audit rows, %v; want 1", n, err)
	}
}

// TestMigrateSQLiteUnreadableTime: a version 1 time SQLite cannot read is
// reported with its job id and column, and nothing is changed.
func TestMigrateSQLiteUnreadableTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, engine.SQLite)
	table := testdb.Table(t, db)
	createV1(t, db, engine.SQLite, table)
	jobs := v1Fixture(engine.SQLite, time.Now().UTC())[:4]
	insertV1(t, db, engine.SQLite, table, jobs)
	q := engine.Table{Kind: engine.SQLite, Name: table}.Quoted()
	if _, err := db.ExecContext(ctx, "UPDATE "+q+" SET expires_at = 'next tuesday' WHERE id = ?", jobs[2].ID); err != nil {
		t.Fatal(err)
	}
	rows, cat := dump(t, db, engine.SQLite, table), readCatalog(t, db, engine.SQLite, table)
	err := Migrate(ctx, db, testPolicy, table)
	want := fmt.Sprintf("job %d has expires_at = \"next tuesday\"", jobs[2].ID)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Migrate = %v; want an error containing %q", err, want)
	}
	if diff := cmp.Diff(rows, dump(t, db, engine.SQLite, table)); diff != "" {
		t.Errorf("rows changed:\n%s", diff)
	}
	if diff := cmp.Diff(cat, readCatalog(t, db, engine.SQLite, table)); diff != "" {
		t.Errorf("catalog changed:\n%s", diff)
	}
}

// TestMigrateForeignTable: a table of that name that is not a jobqueue
// table is refused and left alone.
func TestMigrateForeignTable(t *testing.T) {
	t.Parallel()
	// Tables that are not ours, though they may share a column name or
	// two with version 1 or 2 (another queue's "jobs" table with an
	// attempts column): Install and Migrate refuse them, changing nothing.
	shapes := []struct{ name, columns, row string }{
		{"no version column", "id INT PRIMARY KEY, name VARCHAR(10), status VARCHAR(10)", "1, 'a', 'x'"},
		{"another queue's table", "id INT PRIMARY KEY, queue VARCHAR(255) NOT NULL, payload TEXT NOT NULL, attempts INT NOT NULL, reserved_at INT NULL, available_at INT NOT NULL, created_at INT NOT NULL",
			"1, 'default', '{}', 0, NULL, 0, 0"},
		{"an attempts and a deadline, no type", "id INT PRIMARY KEY, name VARCHAR(255) NOT NULL, payload TEXT NOT NULL, status VARCHAR(20) NOT NULL, attempts INT NOT NULL, expires_at TIMESTAMP NULL, created_at TIMESTAMP NULL",
			"1, 'a', '{}', 'pending', 0, NULL, NULL"},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, shape := range shapes {
			t.Run(shape.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				k, db := e.Kind, e.DB
				table := e.Table(t)
				q := engine.Table{Kind: k, Name: table}.Quoted()
				for _, s := range []string{"CREATE TABLE " + q + " (" + shape.columns + ")", "INSERT INTO " + q + " VALUES (" + shape.row + ")"} {
					if _, err := db.ExecContext(ctx, s); err != nil {
						t.Fatal(err)
					}
				}
				rows, cat := dump(t, db, k, table), readCatalog(t, db, k, table)
				if err := Migrate(ctx, db, testPolicy, table); err == nil || !strings.Contains(err.Error(), "not a jobqueue table") {
					t.Errorf("Migrate on a foreign table = %v; want a refusal", err)
				}
				if err := Install(ctx, db, table); err == nil || errors.Is(err, ErrOutdatedTable) || !strings.Contains(err.Error(), "not a jobqueue table") {
					t.Errorf("Install on a foreign table = %v; want a 'not a jobqueue table' refusal", err)
				}
				assertSameTable(t, db, k, table, rows, cat, "rows changed")
			})
		}
	})
}

// TestMigrateMySQLSparseIDs: MySQL converts rows in batches of ids; a table
// whose ids have a huge gap (an old job kept while millions of others came
// and were pruned) must take about one batch per batch of rows, not one
// per empty id range in between.
func TestMigrateMySQLSparseIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := engine.MySQL
	db := testdb.Open(t, k)
	table := testdb.Table(t, db)
	createV1(t, db, k, table)
	jobs := v1Fixture(k, time.Now().UTC())[:6]
	for i := range jobs {
		jobs[i].ID = int64(i + 1)
		if i >= 3 {
			jobs[i].ID = 1_000_000_000_000 + int64(i)
		}
	}
	insertV1(t, db, k, table, jobs)
	batches := 0
	err := migrate(ctx, db, testPolicy, table, migrateOptions{mysqlBatchIDs: 10, afterBatch: func(n int) error {
		batches = n
		if n > len(jobs) {
			return fmt.Errorf("batch %d for %d rows: the conversion walks empty id ranges", n, len(jobs))
		}
		return nil
	}})
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if batches != 2 {
		t.Errorf("the conversion took %d batches of 10 ids for ids 1-3 and 10^12+3..5; want 2", batches)
	}
	var notConverted int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"` WHERE max_attempts <> ?", testPolicy.MaxAttempts).Scan(&notConverted); err != nil {
		t.Fatal(err)
	}
	if notConverted != 0 {
		t.Errorf("%d rows do not hold the policy after Migrate", notConverted)
	}
}
