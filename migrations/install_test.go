package migrations

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

func TestInstallIsIdempotent(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		name := e.Table(t)
		tb := tableOf(t, k, name)
		if err := Install(context.Background(), db, name); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, v2Row(tb))
		before := imageOf(t, db, tb)
		if err := Install(context.Background(), db, name); err != nil {
			t.Fatalf("second Install: %v", err)
		}
		before.checkSame(t, db, tb, "second Install")
	})
}

// v2Row inserts one version 2 job into tb.
func v2Row(tb engine.Table) string {
	return `INSERT INTO ` + tb.Quoted() + ` (name, payload, max_attempts, base_delay, max_delay, scheduled_at, created_at)
VALUES ('send', '{"to":"a@example.com"}', 3, 60, 3600, '2026-01-02 03:04:05', '2026-01-01 00:00:00')`
}

// dropIndexSQL and createIndexOnSQL are the test's own DDL for an index of tb.
func dropIndexSQL(tb engine.Table, index string) string {
	if tb.Kind == engine.MySQL {
		return "ALTER TABLE " + tb.Quoted() + " DROP INDEX `" + index + "`"
	}
	return `DROP INDEX "` + index + `"`
}

func createIndexOnSQL(tb engine.Table, index, cols string) string {
	if tb.Kind == engine.MySQL {
		return "CREATE INDEX `" + index + "` ON " + tb.Quoted() + " (" + cols + ")"
	}
	return `CREATE INDEX "` + index + `" ON ` + tb.Quoted() + " (" + cols + ")"
}

func TestInstallRepairsIndexesAndKeepsUsersAdditions(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		name := e.Table(t)
		tb := tableOf(t, k, name)
		if err := Install(ctx, db, name); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, v2Row(tb))
		rows := dumpRows(t, db, tb)
		oldIDs := testIDs(t, db, tb)

		userIndex := name + "_tenant"
		mustExec(t, db,
			// A missing index of ours…
			dropIndexSQL(tb, tb.IndexName("status_expires")),
			// …one of ours on the wrong columns…
			dropIndexSQL(tb, tb.IndexName("lease_until")),
			createIndexOnSQL(tb, tb.IndexName("lease_until"), "created_at, lease_until"),
			// …and the user's own column and index.
			"ALTER TABLE "+tb.Quoted()+" ADD COLUMN tenant VARCHAR(32)",
			createIndexOnSQL(tb, userIndex, "tenant, created_at"),
		)
		if err := Install(ctx, db, name); err != nil {
			t.Fatal(err)
		}
		wantIx := append(wantIndexes(k, name), testIndex{Name: userIndex, Columns: []string{"tenant", "created_at"}})
		sortIndexes(wantIx)
		if diff := cmp.Diff(wantIx, testIndexes(t, db, tb)); diff != "" {
			t.Errorf("indexes (-want +got):\n%s", diff)
		}
		cols := testColumns(t, db, tb)
		if last := cols[len(cols)-1]; last.Name != "tenant" || !strings.Contains(strings.ToLower(last.Type), "char") || !strings.Contains(last.Type, "(32)") {
			t.Errorf("user's column: got %+v, want tenant varchar(32)", last)
		}
		if diff := cmp.Diff(rows, dumpRows(t, db, tb), cmp.Transformer("noTenant", func(s string) string {
			return strings.Replace(s, "tenant=<nil> ", "", 1)
		})); diff != "" {
			t.Errorf("rows changed (-before +after):\n%s", diff)
		}
		// The indexes that were right were not rebuilt (PostgreSQL and
		// SQLite show it in their catalogs).
		if k != engine.MySQL {
			newIDs := strings.Join(testIDs(t, db, tb), "\n")
			for _, id := range oldIDs {
				if strings.Contains(id, "status_scheduled") && !strings.Contains(newIDs, id) {
					t.Errorf("index %q was rebuilt although it was right; now:\n%s", id, newIDs)
				}
			}
		}
	})
}

func TestInstallRefusesVersion1Table(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		name := e.Table(t)
		tb := tableOf(t, k, name)
		mustExec(t, db, append(v1DDL(tb), v1Rows(tb))...)
		before := imageOf(t, db, tb)

		err := Install(context.Background(), db, name)
		if !errors.Is(err, ErrOutdatedTable) {
			t.Fatalf("Install on a version 1 table: %v; want ErrOutdatedTable", err)
		}
		for _, s := range []string{"Migrate", "version 1", name} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %q", err, s)
			}
		}
		before.checkSame(t, db, tb, "Install on a version 1 table")
		if len(before.rows) != 3 {
			t.Errorf("%d rows, want 3", len(before.rows))
		}
	})
}

func TestInstallRefusesHalfMigratedTable(t *testing.T) {
	t.Parallel()
	type setup func(t *testing.T, db *sql.DB, tb engine.Table)
	v1With := func(stmts ...func(engine.Table) string) setup {
		return func(t *testing.T, db *sql.DB, tb engine.Table) {
			mustExec(t, db, append(v1DDL(tb), v1Rows(tb))...)
			for _, s := range stmts {
				mustExec(t, db, s(tb))
			}
		}
	}
	v2With := func(stmts ...func(engine.Table) string) setup {
		return func(t *testing.T, db *sql.DB, tb engine.Table) {
			if err := Install(context.Background(), db, tb.Name); err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, v2Row(tb))
			for _, s := range stmts {
				mustExec(t, db, s(tb))
			}
		}
	}
	addColumn := func(def string) func(engine.Table) string {
		return func(tb engine.Table) string { return "ALTER TABLE " + tb.Quoted() + " ADD COLUMN " + def }
	}
	cases := []struct {
		name  string
		kinds []engine.Kind
		setup setup
	}{
		{"v1 plus some v2 columns", testdb.Kinds(), v1With(addColumn("attempts INTEGER NOT NULL DEFAULT 0"), addColumn("max_attempts INTEGER NULL"))},
		{"v1 plus every v2 column", testdb.Kinds(), v1With(
			addColumn("attempts INTEGER NOT NULL DEFAULT 0"), addColumn("claim_token VARCHAR(64)"),
			addColumn("lease_until TIMESTAMP NULL"), addColumn("max_attempts INTEGER NULL"),
			addColumn("base_delay INTEGER NULL"), addColumn("max_delay INTEGER NULL"), addColumn("finished_at TIMESTAMP NULL"))},
		{"v2 with retry_count left", testdb.Kinds(), v2With(addColumn("retry_count INTEGER NOT NULL DEFAULT 0"))},
		{"v2 with locked_at left", testdb.Kinds(), v2With(addColumn("locked_at TIMESTAMP NULL"))},
		{"mysql status without expired", []engine.Kind{engine.MySQL}, v2With(func(tb engine.Table) string {
			return "ALTER TABLE " + tb.Quoted() + " MODIFY status ENUM('pending','in_progress','completed','failed') NOT NULL DEFAULT 'pending'"
		})},
		{"mysql created_at still TIMESTAMP", []engine.Kind{engine.MySQL}, v2With(func(tb engine.Table) string {
			return "ALTER TABLE " + tb.Quoted() + " MODIFY created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP"
		})},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			if !slices.Contains(c.kinds, e.Kind) {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				k, db := e.Kind, e.DB
				name := e.Table(t)
				tb := tableOf(t, k, name)
				c.setup(t, db, tb)
				before := imageOf(t, db, tb)
				err := Install(context.Background(), db, name)
				if !errors.Is(err, ErrOutdatedTable) {
					t.Fatalf("Install: %v; want ErrOutdatedTable", err)
				}
				for _, s := range []string{"Migrate", "interrupted"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				before.checkSame(t, db, tb, "Install")
			})
		}
	})
}

func TestInstallRefusesForeignTable(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		name := e.Table(t)
		tb := tableOf(t, k, name)
		mustExec(t, db, "CREATE TABLE "+tb.Quoted()+" (id INTEGER PRIMARY KEY, status VARCHAR(20), note TEXT)")
		before := takeSnapshot(t, db, tb)
		err := Install(context.Background(), db, name)
		if err == nil || errors.Is(err, ErrOutdatedTable) || !strings.Contains(err.Error(), "not a jobqueue table") {
			t.Fatalf("Install on someone else's table: %v; want a 'not a jobqueue table' error", err)
		}
		if diff := cmp.Diff(before, takeSnapshot(t, db, tb)); diff != "" {
			t.Errorf("Install changed the table (-before +after):\n%s", diff)
		}
	})
}

// closedDB is a *sql.DB of engine k that runs no SQL at all: any statement
// fails with "sql: database is closed".
func closedDB(t *testing.T, k engine.Kind) *sql.DB {
	t.Helper()
	driver, dsn, _, err := engine.DriverDSN(testdb.URL(t, k))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	return db
}

// fakeDriver is a database/sql driver jobqueue does not support; it only
// exists so that a *sql.DB of it can be handed to Install.
type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fakeDriver: no connections")
}

var registerFake sync.Once

func TestInstallRejectsUnsupportedDatabase(t *testing.T) {
	t.Parallel()
	registerFake.Do(func() { sql.Register("jobqueue-migrations-test-fake", fakeDriver{}) })
	db, err := sql.Open("jobqueue-migrations-test-fake", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, d := range []*sql.DB{db, nil} {
		err := Install(context.Background(), d, "jobs")
		if !errors.Is(err, ErrUnsupportedDatabase) {
			t.Errorf("Install: %v; want ErrUnsupportedDatabase", err)
		}
		if _, err := GooseMigrations(d, "jobs", RetryPolicy{}, 1); !errors.Is(err, ErrUnsupportedDatabase) {
			t.Errorf("GooseMigrations: %v; want ErrUnsupportedDatabase", err)
		}
	}
	if err := Install(context.Background(), db, "jobs"); !strings.Contains(err.Error(), "fakeDriver") {
		t.Errorf("error %q does not name the driver", err)
	}
}

func TestInstallConcurrentCalls(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		name := e.Table(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const n = 4
		errs := make(chan error, n)
		var start sync.WaitGroup
		start.Add(1)
		for range n {
			go func() {
				start.Wait()
				errs <- Install(ctx, db, name)
			}()
		}
		start.Done()
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("concurrent Install: %v", err)
			}
		}
		if diff := cmp.Diff(wantIndexes(k, name), testIndexes(t, db, tableOf(t, k, name))); diff != "" {
			t.Errorf("indexes (-want +got):\n%s", diff)
		}
	})
}

func TestInstallWithSingleConnectionPool(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		db.SetMaxOpenConns(1) // goose keeps one connection while a migration runs
		name := e.Table(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := range 2 {
			if err := Install(ctx, db, name); err != nil {
				t.Fatalf("Install #%d with one connection: %v", i+1, err)
			}
		}
		if diff := cmp.Diff(wantIndexes(k, name), testIndexes(t, db, tableOf(t, k, name))); diff != "" {
			t.Errorf("indexes (-want +got):\n%s", diff)
		}
	})
}
