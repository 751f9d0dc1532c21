package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/jobqueue/jobqueue/migrations"
)

// Install creates the table and its indexes, and is idempotent: run it on
// every deploy. It refuses a bad table name before any SQL runs, and an
// outdated (version 1) table with ErrOutdatedTable: Migrate converts that
// one, once.
func ExampleInstall() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Any *sql.DB of pgx (postgres), go-sql-driver/mysql or modernc.org/sqlite.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	for i := 0; i < 2; i++ {
		if err := migrations.Install(ctx, db, "jobs"); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("check:", migrations.Check(ctx, db, "jobs"))

	err = migrations.Install(ctx, db, "jobs; DROP TABLE users")
	fmt.Println("bad name:", errors.Is(err, migrations.ErrInvalidTableName))

	// A version 1 table, as the first release created it.
	if _, err := db.ExecContext(ctx, `CREATE TABLE old_jobs (id INTEGER PRIMARY KEY AUTOINCREMENT,
		name VARCHAR(255) NOT NULL, type VARCHAR(64) NOT NULL DEFAULT 'default', payload TEXT NOT NULL,
		status VARCHAR(20) NOT NULL DEFAULT 'pending', retry_count INTEGER NOT NULL DEFAULT 0, error TEXT,
		scheduled_at DATETIME NOT NULL, locked_at DATETIME, expires_at DATETIME,
		created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)`); err != nil {
		log.Fatal(err)
	}
	err = migrations.Install(ctx, db, "old_jobs")
	fmt.Println("version 1:", errors.Is(err, migrations.ErrOutdatedTable))
	policy := migrations.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Minute, MaxDelay: time.Hour}
	if err := migrations.Migrate(ctx, db, policy, "old_jobs"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Migrate:", migrations.Install(ctx, db, "old_jobs"))
	// Output:
	// check: <nil>
	// bad name: true
	// version 1: true
	// after Migrate: <nil>
}

// Uninstall drops a jobs table with its indexes and side tables, and every
// job in it. It refuses a table of the name that is not a jobqueue table
// (ErrForeignTable), and Check then reports a dropped table missing
// (ErrTableMissing).
func ExampleUninstall() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	if err := migrations.Install(ctx, db, "jobs"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("uninstall:", migrations.Uninstall(ctx, db, "jobs"))
	fmt.Println("missing:", errors.Is(migrations.Check(ctx, db, "jobs"), migrations.ErrTableMissing))

	if _, err := db.ExecContext(ctx, "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)"); err != nil {
		log.Fatal(err)
	}
	err = migrations.Uninstall(ctx, db, "users")
	fmt.Println("someone else's table:", errors.Is(err, migrations.ErrForeignTable))
	// Output:
	// uninstall: <nil>
	// missing: true
	// someone else's table: true
}
