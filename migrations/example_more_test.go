package migrations_test

// Examples of Migrate and Check, on SQLite in a temp dir.

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
	"github.com/jobqueue/jobqueue/queue"
)

// openExampleDB opens a new SQLite database in a temp dir; the returned
// func closes and removes it.
func openExampleDB() (*sql.DB, func()) {
	dir, err := os.MkdirTemp("", "jobqueue-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// v1SQLite creates a version 1 table named jobs, as the first release did.
const v1SQLite = `CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT,
	name VARCHAR(255) NOT NULL, type VARCHAR(64) NOT NULL DEFAULT 'default', payload TEXT NOT NULL,
	status VARCHAR(20) NOT NULL DEFAULT 'pending', retry_count INTEGER NOT NULL DEFAULT 0, error TEXT,
	scheduled_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, locked_at DATETIME, expires_at DATETIME,
	created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)`

// Migrate converts a version 1 table once, with everything that uses it
// stopped, storing the given retry policy with every job (version 1 kept
// none). attempts becomes the attempts started: retry_count, plus one for
// a job that was running or completed. Running jobs had their attempt
// interrupted and are pending again, unless that used up their attempts
// (failed); a pending job past its deadline is expired.
func ExampleMigrate() {
	ctx := context.Background()
	db, done := openExampleDB()
	defer done()
	if _, err := db.ExecContext(ctx, v1SQLite); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO jobs (name, payload, status, retry_count, expires_at, locked_at) VALUES
		('waiting', '{}', 'pending', 0, NULL, NULL),
		('running', '{}', 'in_progress', 1, NULL, CURRENT_TIMESTAMP),
		('last try', '{}', 'in_progress', 2, NULL, CURRENT_TIMESTAMP),
		('done', '{}', 'completed', 0, NULL, NULL),
		('too late', '{}', 'pending', 0, '2000-01-01 00:00:00', NULL)`); err != nil {
		log.Fatal(err)
	}

	policy := migrations.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Minute, MaxDelay: time.Hour}
	for range 2 { // a second run changes nothing
		if err := migrations.Migrate(ctx, db, policy, "jobs"); err != nil {
			log.Fatal(err)
		}
	}

	q, err := queue.New(db) // the version 2 table
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	jobs, err := q.List(ctx, queue.ListFilter{})
	if err != nil {
		log.Fatal(err)
	}
	for i := len(jobs) - 1; i >= 0; i-- {
		j := jobs[i]
		fmt.Printf("%-8s %-9s attempts %d of %d\n", j.Name, j.Status, j.Attempts, j.MaxAttempts)
	}
	// Output:
	// waiting  pending   attempts 0 of 3
	// running  pending   attempts 2 of 3
	// last try failed    attempts 3 of 3
	// done     completed attempts 1 of 3
	// too late expired   attempts 0 of 3
}

// Check tells, changing nothing, whether the queue can use a table: nil
// for a version 2 table, else an error wrapping ErrTableMissing (run
// Install), ErrOutdatedTable (run Migrate) or ErrForeignTable (choose
// another name). A service can run it at start-up, or in a readiness
// probe, where running Install is not wanted.
func ExampleCheck() {
	ctx := context.Background()
	db, done := openExampleDB()
	defer done()

	err := migrations.Check(ctx, db, "jobs")
	fmt.Println("missing:", errors.Is(err, migrations.ErrTableMissing))

	if _, err := db.ExecContext(ctx, v1SQLite); err != nil {
		log.Fatal(err)
	}
	err = migrations.Check(ctx, db, "jobs")
	fmt.Println("version 1:", errors.Is(err, migrations.ErrOutdatedTable))

	if _, err := db.ExecContext(ctx, "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)"); err != nil {
		log.Fatal(err)
	}
	err = migrations.Check(ctx, db, "users")
	fmt.Println("not a jobs table:", errors.Is(err, migrations.ErrForeignTable))

	if err := migrations.Install(ctx, db, "queue_jobs"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("installed:", migrations.Check(ctx, db, "queue_jobs"))
	// Output:
	// missing: true
	// version 1: true
	// not a jobs table: true
	// installed: <nil>
}
