package migrations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMigrateKeepsExtraColumns: a column the user added to the version 1
// table, and an index on it, are still there with their values.
func TestMigrateKeepsExtraColumns(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		jobs := v1Fixture(k, time.Now().UTC())[:6]
		table := v1Table(t, e, jobs)
		tb := engine.Table{Kind: k, Name: table}
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

// TestMigrateKeepsIDCounter: ids are never reused. The job with the highest
// id was deleted before the migration; a job inserted after it gets a
// higher id still (SQLite's rebuild carries the AUTOINCREMENT counter over).
func TestMigrateKeepsIDCounter(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		jobs := v1Fixture(k, time.Now().UTC())
		table := v1Table(t, e, jobs)
		tb := engine.Table{Kind: k, Name: table}
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
		jobs := v1Fixture(k, time.Now().UTC())
		table := v1Table(t, e, jobs)
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
