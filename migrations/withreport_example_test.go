package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// WithReport makes Uninstall (and UninstallEmpty) tell what it dropped:
// whether the table existed, and the jobs it deleted per status, counted
// under the lock the drops run under, so the figure is exact.
func ExampleWithReport() {
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

	if err := migrations.Install(ctx, db, "old_jobs"); err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(db, queue.WithTable("old_jobs"))
	if err != nil {
		log.Fatal(err)
	}
	for _, to := range []string{"a@example.com", "b@example.com"} {
		if _, err := q.Enqueue(ctx, emailJob{To: to}); err != nil {
			log.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		log.Fatal(err)
	}

	var r migrations.UninstallReport
	if err := migrations.Uninstall(ctx, db, "old_jobs", migrations.WithReport(&r)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("missing:", r.Missing, "deleted:", r.Total(), r.Summary())

	if err := migrations.Uninstall(ctx, db, "old_jobs", migrations.WithReport(&r)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("again, missing:", r.Missing, "deleted:", r.Total())
	// Output:
	// missing: false deleted: 2 2 pending
	// again, missing: true deleted: 0
}
