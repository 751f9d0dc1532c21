package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the driver the example opens

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// A team that runs the goose command over a folder of SQL files commits the
// file GooseSQL returns (`jobqueue goose-file` writes it) next to its own;
// its `goose up` then creates the jobs table. Here goose's library runs the
// folder as the goose command would.
func ExampleGooseSQL() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	text, err := migrations.GooseSQL("sqlite", "jobs")
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(text, "\n") {
		if line == "-- +goose Up" || line == "-- +goose Down" {
			fmt.Println(line)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "20260101000000_jobqueue_jobs.sql"), []byte(text), 0o644); err != nil {
		log.Fatal(err)
	}

	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, os.DirFS(dir))
	if err != nil {
		log.Fatal(err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Println("applied", filepath.Base(r.Source.Path))
	}
	q, err := queue.New(db, queue.WithTable("jobs"))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	fmt.Println("the queue runs on table", q.Table())
	// Output:
	// -- +goose Up
	// -- +goose Down
	// applied 20260101000000_jobqueue_jobs.sql
	// the queue runs on table jobs
}
