package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// ExampleWithTransactionPooling opens a queue that keeps no state in a
// database session (no prepared statements; its workers poll instead of
// LISTENing), as behind PgBouncer in transaction pooling mode. On
// PostgreSQL the queue finds it out by itself when pgx is told
// default_query_exec_mode=exec in the URL, which pgx needs there:
//
//	db, err := sql.Open("pgx", "postgres://app@pgbouncer:6432/app?default_query_exec_mode=exec")
//
// The option says it explicitly, on any engine (SQLite here).
func ExampleWithTransactionPooling() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := migrations.Install(ctx, db, "jobs"); err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(db, queue.WithTransactionPooling(true))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}); err != nil {
		log.Fatal(err)
	}
	stats, err := q.Stats(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending:", stats[queue.StatusPending])
	// Output:
	// pending: 1
}

// ExamplePgxWithoutCancelRequests opens a pool of your own for a queue
// behind PgBouncer in transaction pooling mode: statements unnamed
// (default_query_exec_mode=exec) and no cancel requests, which PgBouncer
// 1.18 can crash on.
func ExamplePgxWithoutCancelRequests() {
	cfg, err := pgx.ParseConfig("postgres://app@pgbouncer:6432/app?sslmode=disable&default_query_exec_mode=exec")
	if err != nil {
		log.Fatal(err)
	}
	queue.PgxWithoutCancelRequests(cfg)
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	q, err := queue.New(db, queue.WithTable("jobs"))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
}
