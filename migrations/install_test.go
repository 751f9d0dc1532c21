package migrations

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// wantColumns is the version 2 table of SPEC section 2 as each engine's
// catalog shows it (see testColumns); table is the table name (PostgreSQL
// names the id sequence after it).
func wantColumns(k engine.Kind, table string, mariaDB bool) []testColumn {
	switch k {
	case engine.Postgres:
		ts := "timestamp without time zone"
		return []testColumn{
			{Name: "id", Type: "bigint", NotNull: true, Default: fmt.Sprintf("nextval('%s_id_seq'::regclass)", table)},
			{Name: "name", Type: "character varying(255)", NotNull: true},
			{Name: "type", Type: "character varying(64)", NotNull: true, Default: "'default'::character varying"},
			{Name: "payload", Type: "jsonb", NotNull: true},
			{Name: "status", Type: "character varying(20)", NotNull: true, Default: "'pending'::character varying"},
			{Name: "attempts", Type: "integer", NotNull: true, Default: "0"},
			{Name: "claim_token", Type: "character varying(64)"},
			{Name: "lease_until", Type: ts},
			{Name: "max_attempts", Type: "integer", NotNull: true},
			{Name: "base_delay", Type: "integer", NotNull: true},
			{Name: "max_delay", Type: "integer", NotNull: true},
			{Name: "error", Type: "text"},
			{Name: "scheduled_at", Type: ts, NotNull: true},
			{Name: "expires_at", Type: ts},
			{Name: "finished_at", Type: ts},
			{Name: "created_at", Type: ts, NotNull: true},
		}
	case engine.MySQL:
		bin := "utf8mb4_bin"
		payload := testColumn{Name: "payload", Type: "json", NotNull: true}
		if mariaDB {
			// MariaDB's JSON is LONGTEXT with a json_valid check (tested apart).
			payload = testColumn{Name: "payload", Type: "longtext", NotNull: true, Extra: bin}
		}
		return []testColumn{
			{Name: "id", Type: "bigint unsigned", NotNull: true, Extra: "auto_increment"},
			{Name: "name", Type: "varchar(255)", NotNull: true, Extra: bin},
			{Name: "type", Type: "varchar(64)", NotNull: true, Default: "default", Extra: bin},
			payload,
			{Name: "status", Type: "enum('pending','in_progress','completed','failed','expired')", NotNull: true, Default: "pending", Extra: bin},
			{Name: "attempts", Type: "int unsigned", NotNull: true, Default: "0"},
			{Name: "claim_token", Type: "varchar(64)", Extra: bin},
			{Name: "lease_until", Type: "datetime"},
			{Name: "max_attempts", Type: "int unsigned", NotNull: true},
			{Name: "base_delay", Type: "int unsigned", NotNull: true},
			{Name: "max_delay", Type: "int unsigned", NotNull: true},
			{Name: "error", Type: "text", Extra: bin},
			{Name: "scheduled_at", Type: "datetime", NotNull: true},
			{Name: "expires_at", Type: "datetime"},
			{Name: "finished_at", Type: "datetime"},
			{Name: "created_at", Type: "datetime", NotNull: true},
		}
	default:
		return []testColumn{
			{Name: "id", Type: "INTEGER", Extra: "pk"},
			{Name: "name", Type: "VARCHAR(255)", NotNull: true},
			{Name: "type", Type: "VARCHAR(64)", NotNull: true, Default: "'default'"},
			{Name: "payload", Type: "TEXT", NotNull: true},
			{Name: "status", Type: "VARCHAR(20)", NotNull: true, Default: "'pending'"},
			{Name: "attempts", Type: "INTEGER", NotNull: true, Default: "0"},
			{Name: "claim_token", Type: "VARCHAR(64)"},
			{Name: "lease_until", Type: "DATETIME"},
			{Name: "max_attempts", Type: "INTEGER", NotNull: true},
			{Name: "base_delay", Type: "INTEGER", NotNull: true},
			{Name: "max_delay", Type: "INTEGER", NotNull: true},
			{Name: "error", Type: "TEXT"},
			{Name: "scheduled_at", Type: "DATETIME", NotNull: true},
			{Name: "expires_at", Type: "DATETIME"},
			{Name: "finished_at", Type: "DATETIME"},
			{Name: "created_at", Type: "DATETIME", NotNull: true},
		}
	}
}

// wantIndexes is the four indexes of SPEC section 2 (plus the primary key's
// where the engine keeps one), with their names spelled out per engine.
func wantIndexes(k engine.Kind, table string) []testIndex {
	var prefix string
	var out []testIndex
	switch k {
	case engine.Postgres:
		prefix = "idx_" + table + "_"
		out = append(out, testIndex{Name: table + "_pkey", Unique: true, Columns: []string{"id"}})
	case engine.MySQL:
		prefix = "idx_"
		out = append(out, testIndex{Name: "PRIMARY", Unique: true, Columns: []string{"id"}})
	default:
		prefix = "idx_" + table + "_"
	}
	name := func(suffix string) string {
		n := prefix + suffix
		if k == engine.Postgres && len(n) > 63 {
			n = n[:63] // PostgreSQL's identifier limit
		}
		return n
	}
	out = append(out,
		testIndex{Name: name("lease_until"), Columns: []string{"lease_until"}},
		testIndex{Name: name("status_expires"), Columns: []string{"status", "expires_at"}},
		testIndex{Name: name("status_scheduled"), Columns: []string{"status", "scheduled_at", "id"}},
		testIndex{Name: name("type_status_scheduled"), Columns: []string{"type", "status", "scheduled_at", "id"}},
	)
	sortIndexes(out) // in name order, as testIndexes returns them
	return out
}

func sortIndexes(ix []testIndex) {
	slices.SortFunc(ix, func(a, b testIndex) int { return strings.Compare(a.Name, b.Name) })
}

func TestInstallCreatesVersion2Table(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		name := e.Table(t)
		tb := tableOf(t, k, name)
		if err := Install(context.Background(), db, name); err != nil {
			t.Fatal(err)
		}
		mariaDB := k == engine.MySQL && isMariaDB(t, db)
		if diff := cmp.Diff(wantColumns(k, name, mariaDB), testColumns(t, db, tb)); diff != "" {
			t.Errorf("columns (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantIndexes(k, name), testIndexes(t, db, tb)); diff != "" {
			t.Errorf("indexes (-want +got):\n%s", diff)
		}
		switch k {
		case engine.MySQL:
			if got := testIDs(t, db, tb)[1]; got != "InnoDB utf8mb4_bin" {
				t.Errorf("table options %q, want InnoDB utf8mb4_bin", got)
			}
			if mariaDB {
				var check string
				if err := db.QueryRow(`SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = ?`, name).Scan(&check); err != nil {
					t.Fatalf("payload's JSON check: %v", err)
				}
				if !strings.Contains(check, "json_valid(`payload`)") {
					t.Errorf("payload check %q, want json_valid(`payload`)", check)
				}
			}
		case engine.SQLite:
			var create string
			if err := db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&create); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(create, "INTEGER PRIMARY KEY AUTOINCREMENT") {
				t.Errorf("id is not INTEGER PRIMARY KEY AUTOINCREMENT: %s", create)
			}
			// The database is this test's own: Install ran through goose
			// with versioning disabled, so no goose version table exists.
			var tables []string
			rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				tables = append(tables, n)
			}
			want := []string{"sqlite_sequence", name}
			for _, st := range ddl.SideTables() {
				want = append(want, ddl.Side(tb, st.Suffix).Name)
			}
			slices.Sort(want)
			if diff := cmp.Diff(want, tables); diff != "" {
				t.Errorf("tables after Install (-want +got):\n%s", diff)
			}
		}
		st, err := inspect(context.Background(), db, tb)
		if err != nil || st != tableV2 {
			t.Errorf("inspect = %v, %v; want version 2", st, err)
		}
	})
}

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
		before := takeSnapshot(t, db, tb)
		rows := dumpRows(t, db, tb)
		if err := Install(context.Background(), db, name); err != nil {
			t.Fatalf("second Install: %v", err)
		}
		if diff := cmp.Diff(before, takeSnapshot(t, db, tb)); diff != "" {
			t.Errorf("second Install changed the catalog (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(rows, dumpRows(t, db, tb)); diff != "" {
			t.Errorf("second Install changed the rows (-before +after):\n%s", diff)
		}
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
		before, rows := takeSnapshot(t, db, tb), dumpRows(t, db, tb)

		err := Install(context.Background(), db, name)
		if !errors.Is(err, ErrOutdatedTable) {
			t.Fatalf("Install on a version 1 table: %v; want ErrOutdatedTable", err)
		}
		for _, s := range []string{"Migrate", "version 1", name} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %q", err, s)
			}
		}
		if diff := cmp.Diff(before, takeSnapshot(t, db, tb)); diff != "" {
			t.Errorf("Install changed a version 1 table (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(rows, dumpRows(t, db, tb)); diff != "" {
			t.Errorf("Install changed a version 1 table's rows (-before +after):\n%s", diff)
		}
		if len(rows) != 3 {
			t.Errorf("%d rows, want 3", len(rows))
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
				before, rows := takeSnapshot(t, db, tb), dumpRows(t, db, tb)
				err := Install(context.Background(), db, name)
				if !errors.Is(err, ErrOutdatedTable) {
					t.Fatalf("Install: %v; want ErrOutdatedTable", err)
				}
				for _, s := range []string{"Migrate", "interrupted"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				if diff := cmp.Diff(before, takeSnapshot(t, db, tb)); diff != "" {
					t.Errorf("Install changed the table (-before +after):\n%s", diff)
				}
				if diff := cmp.Diff(rows, dumpRows(t, db, tb)); diff != "" {
					t.Errorf("Install changed the rows (-before +after):\n%s", diff)
				}
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

func TestInstallRejectsBadTableNamesBeforeAnySQL(t *testing.T) {
	t.Parallel()
	long51 := strings.Repeat("a", 51)
	cases := []struct {
		name  string
		kinds []engine.Kind
	}{
		{"", testdb.Kinds()},
		{"1abc", testdb.Kinds()},
		{"a-b", testdb.Kinds()},
		{"x;drop", testdb.Kinds()},
		{"jobs table", testdb.Kinds()},
		{`jo"bs`, testdb.Kinds()},
		{"jöbs", testdb.Kinds()},
		{long51, []engine.Kind{engine.Postgres}},
		{strings.Repeat("a", 57), testdb.Kinds()}, // no room left for the side tables' <table>_<suffix>
		{strings.Repeat("a", 65), testdb.Kinds()},
	}
	testdb.ForEachKind(t, func(t *testing.T, k engine.Kind) {
		db := closedDB(t, k)
		// The control: with a valid name the closed database is reached.
		if err := Install(context.Background(), db, "jobs"); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("Install on a closed database with a valid name: %v; want a 'closed' error", err)
		}
		for _, c := range cases {
			if !slices.Contains(c.kinds, k) {
				continue
			}
			t.Run(fmt.Sprintf("%q", c.name), func(t *testing.T) {
				err := Install(context.Background(), db, c.name)
				if !errors.Is(err, ErrInvalidTableName) {
					t.Errorf("Install = %v; want ErrInvalidTableName", err)
				}
				if _, err := GooseMigrations(db, c.name, RetryPolicy{}, 1); !errors.Is(err, ErrInvalidTableName) {
					t.Errorf("GooseMigrations = %v; want ErrInvalidTableName", err)
				}
			})
		}
	})
}

func TestInstallFoldsNamesToLowerCaseOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, engine.Postgres)
	name := testdb.Table(t, db) // lower case; dropped at the end
	upper := strings.ToUpper(name[:1]) + name[1:]
	if err := Install(ctx, db, upper); err != nil {
		t.Fatal(err)
	}
	if err := Install(ctx, db, name); err != nil {
		t.Fatalf("Install(%q) after Install(%q): %v", name, upper, err)
	}
	if err := Install(ctx, db, strings.ToUpper(name)); err != nil {
		t.Fatalf("Install(%q): %v", strings.ToUpper(name), err)
	}
	var names []string
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
WHERE table_schema = current_schema() AND lower(table_name) = $1`, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if diff := cmp.Diff([]string{name}, names); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantIndexes(engine.Postgres, name), testIndexes(t, db, tableOf(t, engine.Postgres, name))); diff != "" {
		t.Errorf("indexes (-want +got):\n%s", diff)
	}
}

func TestInstallLongNamesOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, engine.Postgres)
	name := testdb.Table(t, nil)
	name += strings.Repeat("x", 50-len(name))
	t.Cleanup(func() { db.Exec(`DROP TABLE IF EXISTS "` + name + `"`) })
	if err := Install(ctx, db, name); err != nil {
		t.Fatal(err)
	}
	got := testIndexes(t, db, tableOf(t, engine.Postgres, name))
	seen := map[string]bool{}
	for _, ix := range got {
		if len(ix.Name) > 63 {
			t.Errorf("index name %q has %d bytes", ix.Name, len(ix.Name))
		}
		if seen[ix.Name] {
			t.Errorf("index name %q twice", ix.Name)
		}
		seen[ix.Name] = true
	}
	want := []testIndex{
		{Name: name + "_pkey", Unique: true, Columns: []string{"id"}},
		{Name: ("idx_" + name + "_lease_until")[:63], Columns: []string{"lease_until"}},
		{Name: ("idx_" + name + "_status_expires")[:63], Columns: []string{"status", "expires_at"}},
		{Name: ("idx_" + name + "_status_scheduled")[:63], Columns: []string{"status", "scheduled_at", "id"}},
		{Name: ("idx_" + name + "_type_status_scheduled")[:63], Columns: []string{"type", "status", "scheduled_at", "id"}},
	}
	sortIndexes(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("indexes (-want +got):\n%s", diff)
	}
	if err := Install(ctx, db, name); err != nil {
		t.Fatalf("second Install: %v", err)
	}
	if err := Install(ctx, db, name+"y"); !errors.Is(err, ErrInvalidTableName) {
		t.Errorf("Install of a 51-character name: %v; want ErrInvalidTableName", err)
	}
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

func TestInstallAgreesWithSchemaSQL(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		fromFile, installed := e.Table(t), e.Table(t)
		mustExec(t, db, schemaSQL(t, k, fromFile)...)
		if err := Install(context.Background(), db, installed); err != nil {
			t.Fatal(err)
		}
		a := takeSnapshot(t, db, tableOf(t, k, fromFile)).normalized(fromFile)
		b := takeSnapshot(t, db, tableOf(t, k, installed)).normalized(installed)
		if k == engine.Postgres {
			// Index OIDs differ between any two tables: compare the rest.
			a.IDs, b.IDs = nil, nil
		}
		if k == engine.SQLite {
			// Root pages differ; the CREATE statements' whitespace may too.
			a.IDs, b.IDs = nil, nil
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("sql/%s/schema.sql (-) and Install (+) differ:\n%s", k, diff)
		}
		if len(a.Columns) != 16 || len(a.Indexes) < 4 {
			t.Errorf("schema.sql table has %d columns and %d indexes; want 16 and the four of SPEC section 2", len(a.Columns), len(a.Indexes))
		}
	})
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

// TestInstallLongestNames: with the longest table name each engine accepts
// (PostgreSQL 50, MySQL and SQLite 56), Install creates the table and
// every side table, and runs again; one more character is refused.
func TestInstallLongestNames(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		max := 56
		if e.Kind == engine.Postgres {
			max = 50
		}
		name := testdb.Table(t, nil)
		name += strings.Repeat("x", max-len(name))
		t.Cleanup(func() { testdb.Drop(t, e.DB, name) })
		for i := range 2 {
			if err := Install(ctx, e.DB, name); err != nil {
				t.Fatalf("Install #%d of a %d-character name: %v", i+1, len(name), err)
			}
		}
		tb := tableOf(t, e.Kind, name)
		for _, o := range ddl.Objects(tb) {
			if o.Drop == "" {
				continue
			}
			if st, err := inspect(ctx, e.DB, o.Table); err != nil || st == tableMissing {
				t.Errorf("%s %s: %v (%v); want it created", o.Kind, o.Name, st, err)
			}
			if got := testColumns(t, e.DB, o.Table); len(got) == 0 {
				t.Errorf("%s %s has no columns", o.Kind, o.Name)
			}
		}
		if err := Install(ctx, e.DB, name+"y"); !errors.Is(err, ErrInvalidTableName) {
			t.Errorf("Install of a %d-character name: %v; want ErrInvalidTableName", len(name)+1, err)
		}
	})
}
