package jobqueueotel_test

// Tests of the gauges (gauges.go) on the three engines, collected with a
// ManualReader, through a database opened with otelsql whose span filter
// counts the statements sent, so that the cache's effect is measured.

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"

	_ "modernc.org/sqlite" // the SQLite driver
)

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
				r, tel := manualGauges(t)
				g, err := tel.RegisterGauges(q, jobqueueotel.GaugeOptions{TTL: c.ttl})
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
// are left out, which OnError hears; bad options are refused with an error
// naming them.
func TestGaugesOptions(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, _, _ := countedQueue(t, e)
	fillGaugeTable(t, ctx, q)

	t.Run("limits", func(t *testing.T) {
		r, tel := manualGauges(t)
		var heard []error // OnError runs within the collect, on this goroutine's call
		o := jobqueueotel.GaugeOptions{CountLimit: 2, MaxTypes: 2, OnError: func(err error) { heard = append(heard, err) }}
		if _, err := tel.RegisterGauges(q, o); err != nil {
			t.Fatal(err)
		}
		got, err := collectGauges(t, ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(heard) != 1 || !strings.Contains(heard[0].Error(), "MaxTypes") {
			t.Errorf("OnError heard %v, want once that the types exceed MaxTypes", heard)
		}
		want := map[string]int64{
			"a/pending": 0, "a/in_progress": 0, "a/completed": 2, "a/failed": 2, "a/expired": 0,
			"b/pending": 2, "b/in_progress": 0, "b/completed": 0, "b/failed": 0, "b/expired": 0,
		}
		if diff := cmp.Diff(want, got.jobs); diff != "" {
			t.Errorf("with CountLimit 2 and MaxTypes 2 (-want +got):\n%s", diff)
		}
	})

	_, tel := manualGauges(t)
	for _, c := range []struct {
		o    jobqueueotel.GaugeOptions
		want string
	}{
		{jobqueueotel.GaugeOptions{TTL: -time.Second}, "TTL"},
		{jobqueueotel.GaugeOptions{MaxTypes: -1}, "MaxTypes"},
		{jobqueueotel.GaugeOptions{CountLimit: -1}, "CountLimit"},
		{jobqueueotel.GaugeOptions{Timeout: -time.Second}, "Timeout"},
		{jobqueueotel.GaugeOptions{Attributes: []attribute.KeyValue{attribute.String("type", "x")}}, `"type" is the gauges' own`},
		{jobqueueotel.GaugeOptions{Attributes: []attribute.KeyValue{attribute.String("status", "x")}}, `"status" is the gauges' own`},
		{jobqueueotel.GaugeOptions{Attributes: []attribute.KeyValue{attribute.String("", "x")}}, "not valid"},
	} {
		t.Run("refused "+c.want, func(t *testing.T) {
			_, err := tel.RegisterGauges(q, c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("RegisterGauges(%+v) = %v, want an error naming %s", c.o, err, c.want)
			}
		})
	}
	if _, err := tel.RegisterGauges(nil, jobqueueotel.GaugeOptions{}); err == nil {
		t.Error("RegisterGauges(nil) succeeded, want an error")
	}
}

// TestGaugesSeveralQueues: two queues (two tables, each with jobs of type
// default) observed on one MeterProvider. Under the same attributes their
// points would overwrite each other (the collect showed the second table's
// 1 pending job for both, the first's 3 lost), so a Telemetry refuses the
// second registration until the first is unregistered (a second Unregister
// of the first does not free the key the second then holds); with
// GaugeOptions.Attributes of their own, or a Telemetry each with
// Config.Attributes of its own, each table's counts are observed under its
// attributes, GaugeOptions' value winning over Config's for one key.
func TestGaugesSeveralQueues(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		q1, table1, _ := countedQueue(t, e)
		q2, table2, _ := countedQueue(t, e)
		for q, n := range map[*queue.Queue]int{q1: 3, q2: 1} {
			for range n {
				if _, err := q.Enqueue(ctx, gaugeJob{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		tableAttr := func(table string) []attribute.KeyValue { return []attribute.KeyValue{attribute.String("table", table)} }
		for _, c := range []struct {
			name string
			// config1 and config2 are the Config.Attributes of each
			// queue's Telemetry; one Telemetry serves both (config1's)
			// unless apart is set.
			config1, config2 []attribute.KeyValue
			apart            bool
			attrs1, attrs2   []attribute.KeyValue // GaugeOptions.Attributes
			refused          bool
			wantPending      map[string]int64 // attributes but type and status → pending jobs of type default
		}{
			{name: "same attributes", refused: true, wantPending: map[string]int64{"": 3}},
			{name: "a table attribute each", attrs1: tableAttr(table1), attrs2: tableAttr(table2),
				wantPending: map[string]int64{"table=" + table1: 3, "table=" + table2: 1}},
			{name: "one plain, one with attributes", attrs2: tableAttr(table2),
				wantPending: map[string]int64{"": 3, "table=" + table2: 1}},
			{name: "a Telemetry each with its Config.Attributes", apart: true, config1: tableAttr(table1), config2: tableAttr(table2),
				wantPending: map[string]int64{"table=" + table1: 3, "table=" + table2: 1}},
			{name: "GaugeOptions.Attributes over Config.Attributes", config1: tableAttr("shared"), attrs2: tableAttr(table2),
				wantPending: map[string]int64{"table=shared": 3, "table=" + table2: 1}},
		} {
			t.Run(c.name, func(t *testing.T) {
				r, mp := manualMeter(t)
				tel1 := telemetryOn(t, mp, c.config1...)
				tel2 := tel1
				if c.apart {
					tel2 = telemetryOn(t, mp, c.config2...)
				}
				g1, err := tel1.RegisterGauges(q1, jobqueueotel.GaugeOptions{Attributes: c.attrs1})
				if err != nil {
					t.Fatal(err)
				}
				g2, err := tel2.RegisterGauges(q2, jobqueueotel.GaugeOptions{Attributes: c.attrs2})
				switch {
				case c.refused && err == nil:
					t.Error("a second queue's gauges under the same attributes on one Telemetry were registered; want them refused")
					defer g2.Unregister()
				case c.refused && !strings.Contains(err.Error(), "GaugeOptions.Attributes"):
					t.Errorf("the refusal %q does not say to set GaugeOptions.Attributes", err)
				case !c.refused && err != nil:
					t.Fatal(err)
				case !c.refused:
					defer func() {
						if err := g2.Unregister(); err != nil {
							t.Error(err)
						}
					}()
				}

				var rm metricdata.ResourceMetrics
				if err := r.Collect(ctx, &rm); err != nil {
					t.Fatal(err)
				}
				got := map[string]int64{}
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						if m.Name != jobqueueotel.MetricJobs {
							continue
						}
						for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
							if s, _ := p.Attributes.Value(jobqueueotel.AttrStatus); s.AsString() != string(queue.StatusPending) {
								continue
							}
							rest, _ := p.Attributes.Filter(func(kv attribute.KeyValue) bool {
								return kv.Key != jobqueueotel.AttrType && kv.Key != jobqueueotel.AttrStatus
							})
							got[rest.Encoded(attribute.DefaultEncoder())] = p.Value
						}
					}
				}
				if diff := cmp.Diff(c.wantPending, got); diff != "" {
					t.Errorf("pending jobs of type default per table attribute (-want +got):\n%s", diff)
				}

				if err := g1.Unregister(); err != nil {
					t.Fatal(err)
				}
				if c.refused {
					// Once the first is unregistered, the second may come;
					// the first's Unregister again leaves it the key.
					g2, err := tel1.RegisterGauges(q2, jobqueueotel.GaugeOptions{})
					if err != nil {
						t.Fatalf("after Unregister, RegisterGauges under the same attributes: %v", err)
					}
					if err := g1.Unregister(); err != nil {
						t.Fatalf("a second Unregister: %v", err)
					}
					if g3, err := tel1.RegisterGauges(q1, jobqueueotel.GaugeOptions{}); err == nil {
						t.Error("after the first gauges' second Unregister, a third queue's gauges took the key the second's hold")
						if err := g3.Unregister(); err != nil {
							t.Error(err)
						}
					}
					if err := g2.Unregister(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	})
}

// TestGaugesReadError: when the table cannot be read (it was dropped), a
// collect observes no gauge, and the failure is kept for the TTL: the next
// collect sends no statement. Without GaugeOptions.OnError each collect
// returns the error (to the SDK, which hands it to otel.Handle); with it,
// the collects return none and OnError hears the failed read once, the
// read's error naming the table.
func TestGaugesReadError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		onError bool
	}{
		{name: "returned to the SDK"},
		{name: "heard by OnError", onError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
			r, tel := manualGauges(t)
			var heard []error // OnError runs within the collect, on this goroutine's call
			o := jobqueueotel.GaugeOptions{}
			if tc.onError {
				o.OnError = func(err error) { heard = append(heard, err) }
			}
			if _, err := tel.RegisterGauges(q, o); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				before := statements.Load()
				got, err := collectGauges(t, ctx, r)
				switch {
				case !tc.onError && err == nil:
					t.Fatalf("collect %d on a dropped table succeeded", i+1)
				case tc.onError && err != nil:
					t.Errorf("collect %d returned %v, want no error (OnError heard it)", i+1, err)
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
			switch {
			case !tc.onError && len(heard) != 0:
				t.Errorf("OnError unset, yet %d errors heard", len(heard))
			case tc.onError && len(heard) != 1:
				t.Errorf("OnError heard %v, want the one failed read (the second collect served the kept failure)", heard)
			case tc.onError && !strings.Contains(heard[0].Error(), table):
				t.Errorf("OnError heard %q, want the read's error naming the table %s", heard[0], table)
			}
		})
	}
}

// ExampleTelemetry_RegisterGauges observes a queue's table with the
// gauges jobqueue.jobs and jobqueue.oldest_pending.age, on the Telemetry's
// MeterProvider; here a ManualReader collects them, in a service the
// MeterProvider's exporter (Prometheus, OTLP) does. The table is read at
// most once per TTL (5 s by default), however often they are collected.
func ExampleTelemetry_RegisterGauges() {
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

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	tel, err := jobqueueotel.New(jobqueueotel.Config{MeterProvider: mp})
	if err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(db, append(tel.QueueOptions(), queue.WithTable("jobs"))...)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	if _, err := tel.RegisterGauges(q, jobqueueotel.GaugeOptions{}); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		if _, err := q.Enqueue(ctx, gaugeJob{}, queue.Type("email")); err != nil {
			log.Fatal(err)
		}
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
