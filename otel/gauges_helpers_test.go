package jobqueueotel_test

// Helpers of the gauge tests (gauges_test.go): the job, a database whose
// statements sent during a collect are counted, a queue on a fresh table
// through it, a manual meter, a collect's points, the table's own counts
// and the jobs the tests start from.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/XSAM/otelsql"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// gaugeJob is the tests' job: a handler fails it for good when Fail is set.
type gaugeJob struct {
	Fail bool `json:"fail"`
}

func (gaugeJob) Kind() string { return "gauge_job" }

// collecting marks the context of a collect (collectGauges), so that
// countingDB counts the statements the collect sends and not those the
// queue sends on its own meanwhile (on PostgreSQL, the NOTIFY of an
// enqueue, sent in the background).
type collecting struct{}

// countingDB opens rawURL through otelsql and counts in *n the statements
// (queries and execs, prepared or not) sent with a collect's context.
// Closed when t ends.
func countingDB(t *testing.T, rawURL string, n *atomic.Int64) *sql.DB {
	t.Helper()
	name, dsn, _, err := engine.DriverDSN(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	db, err := otelsql.Open(name, dsn, otelsql.WithSpanOptions(otelsql.SpanOptions{
		SpanFilter: func(ctx context.Context, m otelsql.Method, _ string, _ []driver.NamedValue) bool {
			switch m {
			case otelsql.MethodConnQuery, otelsql.MethodConnExec, otelsql.MethodStmtQuery, otelsql.MethodStmtExec:
				if ctx.Value(collecting{}) != nil {
					n.Add(1)
				}
			}
			return false
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// countedQueue installs a fresh table on e and opens a queue on it
// through countingDB. It returns the queue (closed when t ends, its error
// checked), the table and the count of statements sent with a collect's
// context.
func countedQueue(t *testing.T, e *testdb.Env) (*queue.Queue, string, *atomic.Int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := e.Table(t)
	if err := migrations.Install(ctx, e.DB, table); err != nil {
		t.Fatalf("installing table %s: %v", table, err)
	}
	statements := new(atomic.Int64)
	q, err := queue.New(countingDB(t, e.URL, statements), queue.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("closing the queue on %s: %v", table, err)
		}
	})
	return q, table, statements
}

// manualMeter returns a ManualReader and a MeterProvider reading through
// it; the provider is shut down when t ends.
func manualMeter(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() {
		if err := mp.Shutdown(context.Background()); err != nil {
			t.Errorf("shutting the meter provider down: %v", err)
		}
	})
	return r, mp
}

// telemetryOn returns a Telemetry on mp (the global tracer) with attrs as
// its Config.Attributes.
func telemetryOn(t *testing.T, mp *sdkmetric.MeterProvider, attrs ...attribute.KeyValue) *jobqueueotel.Telemetry {
	t.Helper()
	tel, err := jobqueueotel.New(jobqueueotel.Config{MeterProvider: mp, Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return tel
}

// manualGauges returns a ManualReader (see manualMeter) and a Telemetry on
// its provider, to register gauges with.
func manualGauges(t *testing.T) (*sdkmetric.ManualReader, *jobqueueotel.Telemetry) {
	t.Helper()
	r, mp := manualMeter(t)
	return r, telemetryOn(t, mp)
}

// gaugePoints are the gauges of one collect: jobs by "type/status", ages
// by type.
type gaugePoints struct {
	jobs map[string]int64
	ages map[string]float64
}

// collectGauges collects r once and returns the two gauges' points.
func collectGauges(t *testing.T, ctx context.Context, r *sdkmetric.ManualReader) (gaugePoints, error) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	err := r.Collect(context.WithValue(ctx, collecting{}, true), &rm)
	got := gaugePoints{jobs: map[string]int64{}, ages: map[string]float64{}}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case jobqueueotel.MetricJobs:
				if m.Unit != "{job}" {
					t.Errorf("%s has unit %q, want {job}", m.Name, m.Unit)
				}
				for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					typ, _ := p.Attributes.Value("type")
					status, _ := p.Attributes.Value("status")
					if p.Attributes.Len() != 2 {
						t.Errorf("%s point has attributes %v, want type and status only", m.Name, p.Attributes.ToSlice())
					}
					got.jobs[typ.AsString()+"/"+status.AsString()] = p.Value
				}
			case jobqueueotel.MetricOldestPendingAge:
				if m.Unit != "s" {
					t.Errorf("%s has unit %q, want s", m.Name, m.Unit)
				}
				for _, p := range m.Data.(metricdata.Gauge[float64]).DataPoints {
					typ, _ := p.Attributes.Value("type")
					if p.Attributes.Len() != 1 {
						t.Errorf("%s point has attributes %v, want type only", m.Name, p.Attributes.ToSlice())
					}
					got.ages[typ.AsString()] = p.Value
				}
			}
		}
	}
	return got, err
}

// tableCounts counts the rows of table per "type/status" straight from the
// table (every status of every present type, zeros included), as the gauges
// must report them.
func tableCounts(t *testing.T, ctx context.Context, db *sql.DB, table string) map[string]int64 {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT type, status, count(*) FROM "+table+" GROUP BY type, status")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var typ, status string
		var n int64
		if err := rows.Scan(&typ, &status, &n); err != nil {
			t.Fatal(err)
		}
		for _, s := range queue.Statuses() {
			if _, ok := out[typ+"/"+string(s)]; !ok {
				out[typ+"/"+string(s)] = 0
			}
		}
		out[typ+"/"+status] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fillGaugeTable enqueues, on q's table: in type "a" 3 jobs that complete
// and 2 that fail for good (worked here); in type "b" 3 pending jobs, the
// oldest due 2 hours ago; in type "c" one pending job due in an hour.
func fillGaugeTable(t *testing.T, ctx context.Context, q *queue.Queue) {
	t.Helper()
	now := time.Now()
	enqueue := func(args gaugeJob, opts ...queue.EnqueueOption) {
		if _, err := q.Enqueue(ctx, args, opts...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		enqueue(gaugeJob{Fail: i >= 3}, queue.Type("a"))
	}
	enqueue(gaugeJob{}, queue.Type("b"), queue.At(now.Add(-2*time.Hour)))
	enqueue(gaugeJob{}, queue.Type("b"), queue.At(now.Add(-time.Hour)))
	enqueue(gaugeJob{}, queue.Type("b"), queue.Delay(time.Hour))
	enqueue(gaugeJob{}, queue.Type("c"), queue.Delay(time.Hour))
	w := q.NewWorker(queue.WorkerConfig{Types: []string{"a"}, MaxJobs: 5, PollInterval: 10 * time.Millisecond})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[gaugeJob]) error {
		if job.Args.Fail {
			return queue.Permanent(errors.New("told to fail"))
		}
		return nil
	})
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
