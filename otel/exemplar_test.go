package jobqueueotel_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// newExemplarTelemetry returns a Telemetry whose spans go to the returned
// recorder and whose instruments, read through the returned reader, keep
// exemplars with the SDK's trace_based filter; both providers are shut down
// at the test's end.
func newExemplarTelemetry(t *testing.T) (*jobqueueotel.Telemetry, *tracetest.SpanRecorder, *sdkmetric.ManualReader) {
	t.Helper()
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithExemplarFilter(exemplar.TraceBasedFilter))
	t.Cleanup(func() {
		if err := errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx)); err != nil {
			t.Error(err)
		}
	})
	tel, err := jobqueueotel.New(jobqueueotel.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	return tel, spans, reader
}

// TestExemplarsCarrySpans: with the SDK's trace_based exemplar filter,
// the measurements of an enqueue carry its jobqueue.enqueue span's trace,
// and those of an attempt's end (jobqueue.jobs.worked and
// jobqueue.job.duration, completed and failed) carry its jobqueue.work
// span's trace, so that a backend links a point to a trace. Before, the
// listener recorded the ends of attempts with context.Background(): no
// exemplar.
func TestExemplarsCarrySpans(t *testing.T) {
	ctx := context.Background()
	tel, spans, reader := newExemplarTelemetry(t)
	q, _ := openQueue(t, testdb.New(t, engine.SQLite), tel.QueueOptions()...)
	for _, typ := range []string{"ok", "bad"} {
		if _, err := q.Enqueue(ctx, task{typ}, queue.Type(typ)); err != nil {
			t.Fatal(err)
		}
	}
	w := q.NewWorker(queue.WorkerConfig{MaxJobs: 2, MaintenanceInterval: -1})
	queue.Handle(w, func(_ context.Context, job *queue.Job[task]) error {
		if job.Args.Do == "bad" {
			return queue.Permanent(errors.New("broken"))
		}
		return nil
	})
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}

	// The trace of each type's span of each name.
	traces := map[string]trace.TraceID{}
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == jobqueueotel.AttrJobType {
				traces[s.Name()+"/"+kv.Value.AsString()] = s.SpanContext().TraceID()
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	spanOf := map[string]string{
		jobqueueotel.MetricEnqueued: jobqueueotel.SpanEnqueue,
		jobqueueotel.MetricWorked:   jobqueueotel.SpanWork,
		jobqueueotel.MetricDuration: jobqueueotel.SpanWork,
	}
	checked := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			span, ok := spanOf[m.Name]
			if !ok {
				continue
			}
			var pts []exemplarPoint
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					pts = append(pts, newExemplarPoint(p.Attributes, p.Exemplars))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts = append(pts, newExemplarPoint(p.Attributes, p.Exemplars))
				}
			}
			for _, p := range pts {
				checked++
				want, ok := traces[span+"/"+p.typ]
				if !ok {
					t.Fatalf("no %s span of type %s", span, p.typ)
				}
				if len(p.traces) != 1 || trace.TraceID(p.traces[0]) != want {
					t.Errorf("%s{type=%s}: exemplars with traces %x, want one with the %s span's trace %s", m.Name, p.typ, p.traces, span, want)
				}
			}
		}
	}
	if checked != 6 {
		t.Errorf("%d points checked, want 6 (enqueued, worked and duration, of types ok and bad)", checked)
	}
}

// exemplarPoint is a data point's type and its exemplars' trace ids.
type exemplarPoint struct {
	typ    string
	traces [][]byte
}

// newExemplarPoint is the exemplarPoint of a point with attrs and xs.
func newExemplarPoint[N int64 | float64](attrs attribute.Set, xs []metricdata.Exemplar[N]) exemplarPoint {
	v, _ := attrs.Value(jobqueueotel.AttrType)
	p := exemplarPoint{typ: v.AsString()}
	for _, x := range xs {
		p.traces = append(p.traces, x.TraceID)
	}
	return p
}
