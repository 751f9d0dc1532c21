package migrations_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/XSAM/otelsql"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// hiddenConnector stands for a wrapper that keeps its driver out of sight.
type hiddenConnector struct{ open func() (driver.Conn, error) }

func (c hiddenConnector) Connect(context.Context) (driver.Conn, error) { return c.open() }
func (c hiddenConnector) Driver() driver.Driver                        { return nil }

// A *sql.DB whose driver is wrapped, here by otelsql (tracing every
// statement), works as it is: the engine is found through the wrapper.
// For a wrapper that hides its driver, name the engine with WithEngine
// (and queue.WithEngine); without it the error says so.
func ExampleWithEngine() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dsn := "file:" + filepath.Join(dir, "app.db") + "?_pragma=busy_timeout(10000)"

	db, err := otelsql.Open("sqlite", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	fmt.Println("otelsql, detected:", migrations.Install(ctx, db, "jobs"))

	hidden := sql.OpenDB(hiddenConnector{open: func() (driver.Conn, error) { return db.Driver().Open(dsn) }})
	defer hidden.Close()
	err = migrations.Check(ctx, hidden, "jobs")
	fmt.Println("hidden, detected:", errors.Is(err, migrations.ErrUnsupportedDatabase))
	fmt.Println("hidden, named:", migrations.Check(ctx, hidden, "jobs", migrations.WithEngine("sqlite")))
	q, err := queue.New(hidden, queue.WithEngine("sqlite"))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	id, err := q.Enqueue(ctx, queue.RawArgs{Name: "hello"})
	fmt.Println("enqueued:", id, err)
	// Output:
	// otelsql, detected: <nil>
	// hidden, detected: true
	// hidden, named: <nil>
	// enqueued: 1 <nil>
}
