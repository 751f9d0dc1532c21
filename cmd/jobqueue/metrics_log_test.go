package main

// Where the metrics' errors go: each promMetrics logs a failed read of its
// table in the log it was made with, whatever other promMetrics the
// process made since (no process-wide OpenTelemetry error handler), and
// so the points the Prometheus registry refuses.

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// TestMetricsErrorsInOwnLog: two promMetrics (as `work --metrics-addr` and
// `web` would make in one process, or two tests in one binary), each
// observing a table of its own; the first one's table is dropped. A
// scrape of the first logs the failed read as a warning in the first's
// log, and nothing in the second's; a scrape of the second logs nothing.
func TestMetricsErrorsInOwnLog(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	type observed struct {
		log   *syncBuffer
		m     *promMetrics
		table string
	}
	open := func() observed {
		o := observed{log: &syncBuffer{}, table: e.Table(t)}
		if err := migrations.Install(ctx, e.DB, o.table); err != nil {
			t.Fatal(err)
		}
		m, err := newPromMetrics(slog.New(slog.NewTextHandler(o.log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		o.m = m
		t.Cleanup(func() {
			if err := m.close(context.Background()); err != nil {
				t.Errorf("closing the metrics: %v", err)
			}
		})
		q, err := queue.New(e.DB, append(m.tel.QueueOptions(), queue.WithTable(o.table))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := q.Close(); err != nil {
				t.Errorf("closing the queue: %v", err)
			}
		})
		if err := m.observe(q, 0); err != nil {
			t.Fatal(err)
		}
		return o
	}
	broken, healthy := open(), open()
	if _, err := e.DB.ExecContext(ctx, "DROP TABLE "+broken.table); err != nil {
		t.Fatal(err)
	}

	get := func(o observed) string {
		rec := httptest.NewRecorder()
		o.m.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, metricsPath, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET /metrics = %d, want 200 (the counters are served whatever the gauges)", rec.Code)
		}
		return rec.Body.String()
	}
	if body := get(broken); strings.Contains(body, "jobqueue_jobs{") {
		t.Errorf("/metrics of the dropped table has jobqueue_jobs points:\n%s", body)
	}
	if body := get(healthy); strings.Contains(body, "jobqueue_jobs{") {
		t.Errorf("/metrics of the empty table has jobqueue_jobs points (it has no type):\n%s", body)
	}
	if got := broken.log.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, broken.table) {
		t.Errorf("the log of the metrics whose table was dropped is %q, want a warning naming the table %s", got, broken.table)
	}
	if got := healthy.log.String(); got != "" {
		t.Errorf("the log of the other metrics is %q, want nothing (the failed read is not theirs)", got)
	}
}

// TestMetricsGatherErrorsLogged: a point Prometheus refuses (here a type
// that is not UTF-8, which another client of a SQLite table can write,
// though Enqueue refuses it) is left out of /metrics, the others served,
// and the refusal is logged as a warning. Before, the handler continued on
// the error with no log to write it to: the series went missing silently.
func TestMetricsGatherErrorsLogged(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := e.Table(t)
	if err := migrations.Install(ctx, e.DB, table); err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	m, err := newPromMetrics(slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.close(context.Background()); err != nil {
			t.Errorf("closing the metrics: %v", err)
		}
	})
	q, err := queue.New(e.DB, append(m.tel.QueueOptions(), queue.WithTable(table))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("closing the queue: %v", err)
		}
	})
	if _, err := q.Enqueue(ctx, queue.RawArgs{Name: "ok", Payload: []byte("{}")}, queue.Type("good")); err != nil {
		t.Fatal(err)
	}
	// Another client's row, with a type Enqueue would refuse.
	if _, err := e.DB.ExecContext(ctx, "INSERT INTO "+table+" (name, type, payload, status, attempts, max_attempts, base_delay, max_delay, scheduled_at, created_at) "+
		"VALUES ('raw', CAST(X'61FF62' AS TEXT), '{}', 'pending', 0, 3, 60, 3600, datetime('now'), datetime('now'))"); err != nil {
		t.Fatal(err)
	}
	if err := m.observe(q, 0); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	m.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, metricsPath, nil))
	if body := rec.Body.String(); rec.Code != http.StatusOK || !strings.Contains(body, `jobqueue_jobs{status="pending",type="good"} 1`) {
		t.Errorf("GET /metrics = %d, want 200 with the good type's points:\n%s", rec.Code, body)
	}
	if got := log.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "UTF-8") {
		t.Errorf("the log is %q, want a warning that a label value is not valid UTF-8", got)
	}
}
