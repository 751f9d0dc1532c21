package jobqueueotel_test

// Tests of the gauges (gauges.go) on the three engines, collected with a
// ManualReader, through a database opened with otelsql whose span filter
// counts the statements sent, so that the cache's effect is measured.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/XSAM/otelsql"
	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"

	_ "modernc.org/sqlite" // the SQLite driver
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

// TestGauges: on every engine, one collect reports jobs per type and
// status equal to the table's counts and the oldest due pending job's age
// per type; a second collect within the TTL sends no statement; once the
// TTL has passed a collect reads the table again and sees a new job.
func TestGauges(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		q, table, statements := countedQueue(t, e)
		start := time.Now()
		fillGaugeTable(t, ctx, q)

		for _, c := range []struct {
			name string
			ttl  time.Duration
		}{{"cached", time.Hour}, {"expired", time.Nanosecond}} {
			t.Run(c.name, func(t *testing.T) {
				r, mp := manualMeter(t)
				g, err := jobqueueotel.RegisterGauges(q, jobqueueotel.GaugeOptions{MeterProvider: mp, TTL: c.ttl})
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := g.Unregister(); err != nil {
						t.Error(err)
					}
				}()

				before := statements.Load()
				got, err := collectGauges(t, ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				if statements.Load() == before {
					t.Fatal("the first collect sent no statement; the counting driver does not see the queue's queries")
				}
				want := tableCounts(t, ctx, e.DB, table)
				if diff := cmp.Diff(want, got.jobs); diff != "" {
					t.Errorf("%s differs from the table (-table +gauge):\n%s", jobqueueotel.MetricJobs, diff)
				}
				if got.jobs["a/completed"] != 3 || got.jobs["a/failed"] != 2 || got.jobs["b/pending"] != 3 {
					t.Errorf("%s = %v, want a/completed 3, a/failed 2, b/pending 3", jobqueueotel.MetricJobs, got.jobs)
				}
				// b's oldest due job was due 2 h before start; a has no
				// pending job and c none due yet.
				maxAge := (2*time.Hour + time.Since(start)).Seconds() + 1
				if age := got.ages["b"]; age < (2*time.Hour).Seconds() || age > maxAge {
					t.Errorf("%s{type=b} = %v, want between 7200 and %v", jobqueueotel.MetricOldestPendingAge, age, maxAge)
				}
				if diff := cmp.Diff(map[string]float64{"a": 0, "b": got.ages["b"], "c": 0}, got.ages); diff != "" {
					t.Errorf("%s per type (-want +got):\n%s", jobqueueotel.MetricOldestPendingAge, diff)
				}

				// A new job, due a minute ago, then another collect.
				id, err := q.Enqueue(ctx, gaugeJob{}, queue.Type("c"), queue.At(time.Now().Add(-time.Minute)))
				if err != nil {
					t.Fatal(err)
				}
				before = statements.Load()
				again, err := collectGauges(t, ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				sent := statements.Load() - before
				switch c.name {
				case "cached":
					if sent != 0 {
						t.Errorf("a collect within the TTL sent %d statements, want none", sent)
					}
					if diff := cmp.Diff(got, again, cmp.AllowUnexported(gaugePoints{})); diff != "" {
						t.Errorf("a collect within the TTL changed the gauges (-first +second):\n%s", diff)
					}
				case "expired":
					if sent == 0 {
						t.Error("a collect after the TTL sent no statement")
					}
					if want := tableCounts(t, ctx, e.DB, table); !cmp.Equal(want, again.jobs) {
						t.Errorf("after the TTL %s = %v, want the table's %v", jobqueueotel.MetricJobs, again.jobs, want)
					}
					if again.ages["c"] < 60 {
						t.Errorf("after the TTL %s{type=c} = %v, want 60 or more (a job was due a minute ago)", jobqueueotel.MetricOldestPendingAge, again.ages["c"])
					}
				}
				// Undo the new job for the next case.
				if err := q.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// TestGaugesOptions: a count limit caps each count; types beyond MaxTypes
// are left out; bad options are refused with an error naming them.
func TestGaugesOptions(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, _, _ := countedQueue(t, e)
	fillGaugeTable(t, ctx, q)

	t.Run("limits", func(t *testing.T) {
		r, mp := manualMeter(t)
		if _, err := jobqueueotel.RegisterGauges(q, jobqueueotel.GaugeOptions{MeterProvider: mp, CountLimit: 2, MaxTypes: 2}); err != nil {
			t.Fatal(err)
		}
		got, err := collectGauges(t, ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{
			"a/pending": 0, "a/in_progress": 0, "a/completed": 2, "a/failed": 2, "a/expired": 0,
			"b/pending": 2, "b/in_progress": 0, "b/completed": 0, "b/failed": 0, "b/expired": 0,
		}
		if diff := cmp.Diff(want, got.jobs); diff != "" {
			t.Errorf("with CountLimit 2 and MaxTypes 2 (-want +got):\n%s", diff)
		}
	})

	for _, c := range []struct {
		o    jobqueueotel.GaugeOptions
		want string
	}{
		{jobqueueotel.GaugeOptions{TTL: -time.Second}, "TTL"},
		{jobqueueotel.GaugeOptions{MaxTypes: -1}, "MaxTypes"},
		{jobqueueotel.GaugeOptions{CountLimit: -1}, "CountLimit"},
		{jobqueueotel.GaugeOptions{Timeout: -time.Second}, "Timeout"},
	} {
		t.Run("refused "+c.want, func(t *testing.T) {
			_, err := jobqueueotel.RegisterGauges(q, c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("RegisterGauges(%+v) = %v, want an error naming %s", c.o, err, c.want)
			}
		})
	}
	if _, err := jobqueueotel.RegisterGauges(nil, jobqueueotel.GaugeOptions{}); err == nil {
		t.Error("RegisterGauges(nil) succeeded, want an error")
	}
}

// TestGaugesReadError: when the table cannot be read (it was dropped), a
// collect returns the error and observes no gauge, and the failure is kept
// for the TTL: the next collect sends no statement.
func TestGaugesReadError(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, table, statements := countedQueue(t, e)
	if _, err := q.Enqueue(ctx, gaugeJob{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.ExecContext(ctx, "DROP TABLE "+table); err != nil {
		t.Fatal(err)
	}
	r, mp := manualMeter(t)
	if _, err := jobqueueotel.RegisterGauges(q, jobqueueotel.GaugeOptions{MeterProvider: mp}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		before := statements.Load()
		got, err := collectGauges(t, ctx, r)
		if err == nil {
			t.Fatalf("collect %d on a dropped table succeeded", i+1)
		}
		if len(got.jobs)+len(got.ages) != 0 {
			t.Errorf("collect %d observed %v despite the error", i+1, got)
		}
		switch sent := statements.Load() - before; {
		case i == 0 && sent == 0:
			t.Error("the first collect sent no statement")
		case i == 1 && sent != 0:
			t.Errorf("the second collect within the TTL sent %d statements after a failed read, want none", sent)
		}
	}
}

// ExampleRegisterGauges observes a queue's table with the gauges
// jobqueue.jobs and jobqueue.oldest_pending.age; here a ManualReader
// collects them, in a service the MeterProvider's exporter (Prometheus,
// OTLP) does. The table is read at most once per TTL (5 s by default),
// however often they are collected.
func ExampleRegisterGauges() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-gauges-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
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
	defer q.Close()
	for range 2 {
		if _, err := q.Enqueue(ctx, gaugeJob{}, queue.Type("email")); err != nil {
			log.Fatal(err)
		}
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	if _, err := jobqueueotel.RegisterGauges(q, jobqueueotel.GaugeOptions{MeterProvider: mp}); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != jobqueueotel.MetricJobs {
			continue
		}
		for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
			typ, _ := p.Attributes.Value("type")
			status, _ := p.Attributes.Value("status")
			fmt.Printf("%s{type=%s,status=%s} %d\n", m.Name, typ.AsString(), status.AsString(), p.Value)
		}
	}
	// Unordered output:
	// jobqueue.jobs{type=email,status=pending} 2
	// jobqueue.jobs{type=email,status=in_progress} 0
	// jobqueue.jobs{type=email,status=completed} 0
	// jobqueue.jobs{type=email,status=failed} 0
	// jobqueue.jobs{type=email,status=expired} 0
}
