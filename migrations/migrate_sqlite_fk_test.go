package migrations

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// sqliteFKURL is the URL of a new SQLite file in t's temp dir, with
// foreign_keys on for every connection when on is true.
func sqliteFKURL(t *testing.T, on bool) string {
	url := "sqlite:" + filepath.Join(t.TempDir(), "fk.db")
	if on {
		url += "?_pragma=foreign_keys(1)"
	}
	return url
}

// childTable creates the user's table child with a foreign key to the
// jobs table tb (ON DELETE action) and one row referencing each job.
func childTable(t *testing.T, db *sql.DB, tb engine.Table, child, action string) {
	t.Helper()
	mustExec(t, db,
		`CREATE TABLE `+child+` (job_id INTEGER DEFAULT 0 REFERENCES `+tb.Quoted()+`(id) ON DELETE `+action+`, note TEXT)`,
		`INSERT INTO `+child+` (job_id, note) SELECT id, 'keep me' FROM `+tb.Quoted())
}

// TestMigrateSQLiteKeepsReferencingRows: with foreign_keys on for every
// connection of the pool (the URL's pragma), Migrate's table rebuild fires
// no ON DELETE action of the user's tables that reference the jobs table:
// their rows and references are all kept, whatever the action; and the
// connection Migrate ran on has foreign_keys on again afterwards.
func TestMigrateSQLiteKeepsReferencingRows(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"CASCADE", "SET NULL", "SET DEFAULT", "RESTRICT", "NO ACTION"} {
		t.Run(strings.ReplaceAll(action, " ", "_"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.OpenURL(t, sqliteFKURL(t, true))
			db.SetMaxOpenConns(1) // the connection checked below is Migrate's
			table := "fk_jobs"
			tb := engine.Table{Kind: engine.SQLite, Name: table}
			createV1(t, db, engine.SQLite, table)
			insertV1(t, db, engine.SQLite, table, v1Fixture(engine.SQLite, time.Now().UTC())[:5])
			childTable(t, db, tb, "fk_results", action)
			want := testdb.Strings(t, db, `SELECT COALESCE(job_id, 'NULL') || ' ' || note FROM fk_results ORDER BY rowid`)

			if err := Migrate(ctx, db, testPolicy, table); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			got := testdb.Strings(t, db, `SELECT COALESCE(job_id, 'NULL') || ' ' || note FROM fk_results ORDER BY rowid`)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the referencing table's rows after Migrate (-before +after):\n%s", diff)
			}
			if st, err := inspect(ctx, db, tb); err != nil || st != tableV2 {
				t.Fatalf("table after Migrate: %v, %v; want version 2", st, err)
			}
			var on int
			if err := db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&on); err != nil || on != 1 {
				t.Errorf("PRAGMA foreign_keys after Migrate = %d, %v; want 1 (restored)", on, err)
			}
			// The foreign key still works against the new table.
			if _, err := db.ExecContext(ctx, `INSERT INTO fk_results (job_id, note) VALUES (987654, 'dangling')`); err == nil {
				t.Error("a reference to a missing job was accepted after Migrate; want the foreign key enforced")
			}
		})
	}
}

// TestMigrateSQLiteForeignKeyCheck: when foreign_keys was on, Migrate runs
// PRAGMA foreign_key_check on the references to the rebuilt table before
// it commits; a row referencing no job (written while foreign_keys was
// off) makes it fail with the row named and nothing changed.
func TestMigrateSQLiteForeignKeyCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := sqliteFKURL(t, false)
	off := testdb.OpenURL(t, url)
	table := "fk_jobs"
	tb := engine.Table{Kind: engine.SQLite, Name: table}
	createV1(t, off, engine.SQLite, table)
	insertV1(t, off, engine.SQLite, table, v1Fixture(engine.SQLite, time.Now().UTC())[:3])
	childTable(t, off, tb, "fk_results", "CASCADE")
	mustExec(t, off, `INSERT INTO fk_results (job_id, note) VALUES (424242, 'dangling')`)

	db := testdb.OpenURL(t, url+"?_pragma=foreign_keys(1)")
	rows, cat := dump(t, db, engine.SQLite, table), readCatalog(t, db, engine.SQLite, table)
	err := Migrate(ctx, db, testPolicy, table)
	if err == nil || !strings.Contains(err.Error(), "fk_results") || !strings.Contains(err.Error(), "foreign_key_check") {
		t.Fatalf("Migrate with a dangling reference = %v; want an error naming fk_results and foreign_key_check", err)
	}
	assertSameTable(t, db, engine.SQLite, table, rows, cat, "table after the refused migration")
}

// TestGooseMigrationsSQLiteRefuseReferencedTableWithForeignKeysOn: in a
// service's own goose run the migration cannot turn foreign_keys off (its
// transaction is already open), so with foreign_keys on and a user's table
// referencing the version 1 table it refuses, saying how to run it, and
// changes nothing; without such a reference, or with foreign_keys off, it
// converts the table.
func TestGooseMigrationsSQLiteRefuseReferencedTableWithForeignKeysOn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		foreignKeys bool // foreign_keys on for the pool
		reference   bool // a table of the user's references the jobs table
		wantRefusal bool
	}{
		{"foreign keys on, referenced", true, true, true},
		{"foreign keys on, not referenced", true, false, false},
		{"foreign keys off, referenced", false, true, false},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.OpenURL(t, sqliteFKURL(t, c.foreignKeys))
			table := "fk_jobs"
			tb := engine.Table{Kind: engine.SQLite, Name: table}
			createV1(t, db, engine.SQLite, table)
			insertV1(t, db, engine.SQLite, table, v1Fixture(engine.SQLite, time.Now().UTC())[:3])
			if c.reference {
				childTable(t, db, tb, "fk_results", "CASCADE")
			}
			rows, cat := dump(t, db, engine.SQLite, table), readCatalog(t, db, engine.SQLite, table)

			ms, err := GooseMigrations(db, table, testPolicy, 5)
			if err != nil {
				t.Fatal(err)
			}
			p, err := goose.NewProvider(goose.DialectSQLite3, db, nil, goose.WithGoMigrations(ms...), goose.WithDisableGlobalRegistry(true))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Up(ctx)
			if !c.wantRefusal {
				if err != nil {
					t.Fatalf("goose up: %v", err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), "fk_results") || !strings.Contains(err.Error(), "foreign_keys") {
					t.Fatalf("goose up = %v; want a refusal naming fk_results and foreign_keys", err)
				}
				assertSameTable(t, db, engine.SQLite, table, rows, cat, "table after the refusal")
			}
			if c.reference {
				if n := len(testdb.Strings(t, db, `SELECT note FROM fk_results WHERE job_id IS NOT NULL`)); n != 3 {
					t.Errorf("fk_results has %d references left, want all 3", n)
				}
			}
			if st, err := inspect(ctx, db, tb); err != nil || (st == tableV2) == c.wantRefusal {
				t.Errorf("table is %v (%v) after goose up; want version 2 unless refused (refused: %v)", st, err, c.wantRefusal)
			}
		})
	}
}
