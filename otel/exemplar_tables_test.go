package jobqueueotel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// TestExemplarsOfTwoTables: one Telemetry instruments two queues (its
// QueueOptions given to each), whose tables each hold a job of id 1 (type
// "a" in one, "b" in the other); both attempts run at once. Each end's
// jobqueue.jobs.worked carries its own attempt's work span. Before, the
// spans were kept by job id for the whole Telemetry: the second attempt's
// span replaced the first's, so one end carried the other table's trace
// or none.
func TestExemplarsOfTwoTables(t *testing.T) {
	ctx := context.Background()
	tel, spans, reader := newExemplarTelemetry(t)
	e := testdb.New(t, engine.SQLite)
	started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	other := map[string]string{"a": "b", "b": "a"}
	done := make(chan error, 2)
	for _, typ := range []string{"a", "b"} {
		q, _ := openQueue(t, e, tel.QueueOptions()...)
		id, err := q.Enqueue(ctx, task{"ok"}, queue.Type(typ))
		if err != nil {
			t.Fatal(err)
		}
		if id != 1 {
			t.Fatalf("the job of type %s has id %d, want 1 (each table's first)", typ, id)
		}
		w := q.NewWorker(queue.WorkerConfig{MaxJobs: 1, MaintenanceInterval: -1})
		queue.Handle(w, func(ctx context.Context, job *queue.Job[task]) error {
			// Both attempts are under way (their spans started) before
			// either ends.
			close(started[job.Type])
			select {
			case <-started[other[job.Type]]:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		go func() { done <- w.Run(ctx) }()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	traces := map[string]trace.TraceID{} // type → its work span's trace
	for _, s := range spans.Ended() {
		if s.Name() != jobqueueotel.SpanWork {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == jobqueueotel.AttrJobType {
				traces[kv.Value.AsString()] = s.SpanContext().TraceID()
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != jobqueueotel.MetricWorked {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				p := newExemplarPoint(dp.Attributes, dp.Exemplars)
				checked++
				if want := traces[p.typ]; len(p.traces) != 1 || trace.TraceID(p.traces[0]) != want {
					t.Errorf("%s{type=%s}: exemplars with traces %x, want one with its own work span's trace %s (the other's: %s)",
						m.Name, p.typ, p.traces, want, traces[other[p.typ]])
				}
			}
		}
	}
	if checked != 2 {
		t.Errorf("%d points of %s checked, want 2 (types a and b)", checked, jobqueueotel.MetricWorked)
	}
}
