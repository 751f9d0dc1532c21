package migrations

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/XSAM/otelsql"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

// opaqueConnector opens connections through a driver it keeps in a
// closure, where no detection can see it: the engine must be named.
type opaqueConnector struct {
	dsn  string
	open func(dsn string) (driver.Conn, error)
}

func (c opaqueConnector) Connect(context.Context) (driver.Conn, error) { return c.open(c.dsn) }
func (c opaqueConnector) Driver() driver.Driver                        { return opaqueDriver(c) }

type opaqueDriver opaqueConnector

func (d opaqueDriver) Open(dsn string) (driver.Conn, error) { return d.open(dsn) }

// openWrapped opens the database at rawURL through otelsql, tracing to tp:
// as otelsql.Open does, or, when opaque, with otelsql's driver inside an
// opaqueConnector. The pool is closed when t ends.
func openWrapped(t *testing.T, rawURL string, opaque bool, tp trace.TracerProvider) *sql.DB {
	t.Helper()
	name, dsn, _, err := engine.DriverDSN(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	var db *sql.DB
	if opaque {
		plain, err := sql.Open(name, dsn)
		if err != nil {
			t.Fatal(err)
		}
		wrapped := otelsql.WrapDriver(plain.Driver(), otelsql.WithTracerProvider(tp))
		if err := plain.Close(); err != nil {
			t.Fatal(err)
		}
		db = sql.OpenDB(opaqueConnector{dsn: dsn, open: wrapped.Open})
	} else if db, err = otelsql.Open(name, dsn, otelsql.WithTracerProvider(tp)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestWrappedDriver: through a *sql.DB whose driver otelsql wraps, Install,
// Check and Migrate work and a queue enqueues and works jobs, with the
// engine detected through otelsql, or named (WithEngine) for a wrapper no
// detection sees through, which without the option is refused with an
// error that names it.
func TestWrappedDriver(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range []struct {
			name     string
			explicit bool
		}{{"detected", false}, {"explicit", true}} {
			t.Run(c.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				rec := tracetest.NewSpanRecorder()
				db := openWrapped(t, e.URL, c.explicit, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
				table, v1 := e.Table(t), e.Table(t)
				var opts []Option
				qopts := []queue.Option{queue.WithTable(table), queue.WithLogger(testdb.QuietLogger())}
				if c.explicit {
					err := Install(ctx, db, table)
					if !errors.Is(err, ErrUnsupportedDatabase) || !strings.Contains(err.Error(), "migrations.WithEngine") {
						t.Fatalf("Install through an opaque wrapper without WithEngine = %v; want ErrUnsupportedDatabase naming WithEngine", err)
					}
					if _, err := queue.New(db, qopts...); !errors.Is(err, ErrUnsupportedDatabase) || !strings.Contains(err.Error(), "queue.WithEngine") {
						t.Fatalf("queue.New through an opaque wrapper without WithEngine = %v; want ErrUnsupportedDatabase naming WithEngine", err)
					}
					opts = []Option{WithEngine(string(e.Kind))}
					qopts = append(qopts, queue.WithEngine(string(e.Kind)))
				}

				if err := Install(ctx, db, table, opts...); err != nil {
					t.Fatalf("Install: %v", err)
				}
				if err := Check(ctx, db, table, opts...); err != nil {
					t.Fatalf("Check: %v", err)
				}
				q, err := queue.New(db, qopts...)
				if err != nil {
					t.Fatalf("queue.New: %v", err)
				}
				defer q.Close()
				if _, err := q.Enqueue(ctx, queue.RawArgs{Name: "wrapped", Payload: json.RawMessage(`{"n":0}`)}); err != nil {
					t.Fatalf("Enqueue: %v", err)
				}
				many := []queue.JobArgs{
					queue.RawArgs{Name: "wrapped", Payload: json.RawMessage(`{"n":1}`)},
					queue.RawArgs{Name: "wrapped", Payload: json.RawMessage(`{"n":2}`)},
				}
				if _, err := q.EnqueueMany(ctx, many); err != nil {
					t.Fatalf("EnqueueMany: %v", err)
				}
				var ran atomic.Int64
				w := q.NewWorker(queue.WorkerConfig{Concurrency: 2, Lease: time.Minute, PollInterval: 20 * time.Millisecond,
					MaintenanceInterval: -1, MaxJobs: 3})
				w.HandleDefault(func(context.Context, *queue.JobRow) error { ran.Add(1); return nil })
				if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
					t.Fatalf("worker: %v", err)
				}
				stats, err := q.Stats(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				if ran.Load() != 3 || stats[queue.StatusCompleted] != 3 {
					t.Errorf("handler ran %d times, %d jobs completed; want 3 and 3", ran.Load(), stats[queue.StatusCompleted])
				}

				createV1(t, e.DB, e.Kind, v1)
				insertV1(t, e.DB, e.Kind, v1, v1Fixture(e.Kind, time.Now().UTC()))
				if err := Check(ctx, db, v1, opts...); !errors.Is(err, ErrOutdatedTable) {
					t.Fatalf("Check on the version 1 table = %v; want ErrOutdatedTable", err)
				}
				if err := Migrate(ctx, db, testPolicy, v1, opts...); err != nil {
					t.Fatalf("Migrate: %v", err)
				}
				if err := Check(ctx, db, v1, opts...); err != nil {
					t.Fatalf("Check after Migrate: %v", err)
				}
				if n := len(rec.Ended()); n == 0 {
					t.Error("otelsql recorded no span: the statements did not go through the wrapper")
				}
			})
		}
	})
}
