package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// emailJob is the job of the UninstallEmpty example.
type emailJob struct {
	To string `json:"to"`
}

func (emailJob) Kind() string { return "email" }

// UninstallEmpty drops a table only while it holds no job: it counts the
// jobs and drops the table under one lock that enqueues wait for, so a
// job enqueued meanwhile is never dropped. A table that holds jobs is
// refused with a *JobsHeldError that counts them.
func ExampleUninstallEmpty() {
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
	q, err := queue.New(db, queue.WithTable("jobs"))
	if err != nil {
		log.Fatal(err)
	}
	id, err := q.Enqueue(ctx, emailJob{To: "a@example.com"})
	if err != nil {
		log.Fatal(err)
	}

	err = migrations.UninstallEmpty(ctx, db, "jobs")
	var held *migrations.JobsHeldError
	if errors.As(err, &held) {
		fmt.Println("refused:", errors.Is(err, migrations.ErrTableHoldsJobs), held.Summary())
	}

	if err := q.Delete(ctx, id); err != nil {
		log.Fatal(err)
	}
	if err := q.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("empty:", migrations.UninstallEmpty(ctx, db, "jobs"))
	fmt.Println("missing:", errors.Is(migrations.Check(ctx, db, "jobs"), migrations.ErrTableMissing))
	// Output:
	// refused: true 1 pending
	// empty: <nil>
	// missing: true
}
