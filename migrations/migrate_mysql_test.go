package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

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

// TestMigrateMySQLTimeZoneRestoreFails: the migration's session dies after
// its last step (killed here, as a server restart or a network failure
// would), so the session's time zone cannot be set back. Migrate says so
// instead of reporting success, and the pool hands out no session left in
// UTC; Migrate again finds the table converted.
func TestMigrateMySQLTimeZoneRestoreFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.OpenURL(t, mysqlURLWithParam(t, "time_zone", "'+03:00'"))
	table := testdb.Table(t, db)
	createV1(t, db, engine.MySQL, table)
	insertV1(t, db, engine.MySQL, table, v1Fixture(engine.MySQL, time.Now().UTC()))
	admin := testdb.Open(t, engine.MySQL)
	steps := len((&converter{}).mysqlSteps())
	err := migrate(ctx, db, testPolicy, table, migrateOptions{afterStep: func(n int, _ string) error {
		if n != steps {
			return nil
		}
		// The migration's session holds the table's install lock.
		var id sql.NullInt64
		if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(CONCAT('jobqueue:', LEFT(SHA2(CONCAT(DATABASE(), '.', ?), 256), 40)))", table).Scan(&id); err != nil || !id.Valid {
			return fmt.Errorf("finding the migration's session: %d, %v", id.Int64, err)
		}
		_, err := admin.ExecContext(ctx, fmt.Sprintf("KILL %d", id.Int64))
		return err
	}})
	if err == nil || !strings.Contains(err.Error(), "restore the session time zone") || !strings.Contains(err.Error(), "run Migrate again") {
		t.Fatalf("Migrate whose session died before the time zone was restored = %v; want an error saying so and what to do", err)
	}
	for range 3 { // more than the pool's idle connections the migration used
		var tz string
		if err := db.QueryRowContext(ctx, "SELECT @@session.time_zone").Scan(&tz); err != nil || tz != "+03:00" {
			t.Fatalf("session time zone after the failed restore: %q, %v; want the pool's +03:00", tz, err)
		}
	}
	if err := Migrate(ctx, db, testPolicy, table); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if st, err := inspect(ctx, db, engine.Table{Kind: engine.MySQL, Name: table}); err != nil || st != tableV2 {
		t.Fatalf("table after Migrate again: %s, %v; want version 2", st, err)
	}
}

// TestMigrateMySQLResumeKeepsThePolicy: a MySQL migration interrupted in
// the middle of the row conversion is resumed with the policy it started
// with; given another one, Migrate refuses, converting nothing more, and
// names the stored policy. It converted the rest with the other policy, so
// the jobs of one table held two policies.
func TestMigrateMySQLResumeKeepsThePolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testdb.New(t, engine.MySQL)
	table := v1Table(t, e, v1Fixture(e.Kind, time.Now().UTC()))
	err := migrate(ctx, e.DB, testPolicy, table, migrateOptions{mysqlBatchIDs: 10, afterBatch: func(n int) error {
		if n == 2 {
			return errInjected
		}
		return nil
	}})
	if !errors.Is(err, errInjected) {
		t.Fatalf("migrate = %v; want the injected failure after batch 2", err)
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := e.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"` WHERE "+q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	todo := count("attempts IS NULL")
	if todo == 0 {
		t.Fatal("every row was converted before the interruption")
	}
	other := RetryPolicy{MaxAttempts: 7, BaseDelay: time.Minute, MaxDelay: time.Hour}
	err = Migrate(ctx, e.DB, other, table)
	if err == nil || !strings.Contains(err.Error(), "max attempts 3, base delay 30 s, max delay 600 s") {
		t.Errorf("Migrate resumed with another policy = %v; want an error naming the stored one", err)
	}
	if n := count("attempts IS NULL"); n != todo {
		t.Errorf("%d rows left to convert after the refused resume; want %d", n, todo)
	}
	if err := Migrate(ctx, e.DB, testPolicy, table); err != nil {
		t.Fatalf("Migrate with the same policy: %v", err)
	}
	if n := count("max_attempts <> 3 OR base_delay <> 30 OR max_delay <> 600"); n != 0 {
		t.Errorf("%d jobs hold another policy than the migration's", n)
	}
}
