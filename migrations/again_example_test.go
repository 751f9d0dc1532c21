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

// A migration that fails is a *RunAgainError: fix the cause, then run the
// same call again. A tool that runs Migrate for its users names its own
// command in the advice by setting Step on a copy.
func ExampleRunAgainError() {
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

	// A version 1 table, and a table under the name the migration
	// rebuilds it into (left by hand, say).
	for _, q := range []string{
		`CREATE TABLE old_jobs (id INTEGER PRIMARY KEY AUTOINCREMENT,
		name VARCHAR(255) NOT NULL, type VARCHAR(64) NOT NULL DEFAULT 'default', payload TEXT NOT NULL,
		status VARCHAR(20) NOT NULL DEFAULT 'pending', retry_count INTEGER NOT NULL DEFAULT 0, error TEXT,
		scheduled_at DATETIME NOT NULL, locked_at DATETIME, expires_at DATETIME,
		created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)`,
		`CREATE TABLE old_jobs__jobqueue_v2 (x INTEGER)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			log.Fatal(err)
		}
	}
	policy := migrations.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Minute, MaxDelay: time.Hour}
	err = migrations.Migrate(ctx, db, policy, "old_jobs")
	var again *migrations.RunAgainError
	if !errors.As(err, &again) {
		log.Fatalf("Migrate = %v", err)
	}
	fmt.Println("run again:", again.Step, "on", again.Table)
	tool := *again
	tool.Step = "'mytool migrate old_jobs'"
	fmt.Println(tool.Error())

	if _, err := db.ExecContext(ctx, `DROP TABLE old_jobs__jobqueue_v2`); err != nil {
		log.Fatal(err)
	}
	fmt.Println("again:", migrations.Migrate(ctx, db, policy, "old_jobs"))
	// Output:
	// run again: Migrate on old_jobs
	// migrate table old_jobs to version 2: step 3 (create the version 2 table): table old_jobs__jobqueue_v2 exists; the migration rebuilds old_jobs under that name: rename or drop it (nothing was changed (one transaction); fix the cause and run 'mytool migrate old_jobs' again)
	// again: <nil>
}
