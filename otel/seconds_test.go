package jobqueueotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// TestHistogramsInSeconds: jobqueue.job.wait measures from a job's
// scheduled_at to its claim and jobqueue.job.duration how long its handler
// ran, both in seconds (SPEC section 11), on every engine: a job due an hour
// before it is claimed waits 3600 s or a little more (MySQL's DATETIME keeps
// whole seconds: 1 s either way), and a handler that runs 300 ms lasts
// 0.3 s or more, no longer than the whole test. The units ("s") are checked
// elsewhere; this checks the values.
func TestHistogramsInSeconds(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rec := newRecorded(t)
		q, _ := openQueue(t, e, rec.tel.QueueOptions()...)
		const due, runs = time.Hour, 300 * time.Millisecond
		start := time.Now()
		if _, err := q.Enqueue(ctx, task{"ok"}, queue.Type("late"), queue.At(start.Add(-due))); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, task{"run"}, queue.Type("slow")); err != nil {
			t.Fatal(err)
		}
		w := q.NewWorker(queue.WorkerConfig{MaxJobs: 2, MaintenanceInterval: -1})
		queue.Handle(w, func(ctx context.Context, job *queue.Job[task]) error {
			if job.Args.Do != "run" {
				return nil
			}
			select { // the handler's work: it takes runs
			case <-time.After(runs):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)

		var rm metricdata.ResourceMetrics
		if err := rec.reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		type key struct{ name, typ string }
		got := map[key][]float64{} // the sums of the points, one per measurement here
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
					for _, p := range h.DataPoints {
						typ, _ := p.Attributes.Value(jobqueueotel.AttrType)
						if p.Count != 1 {
							t.Errorf("%s{%s} has %d measurements, want 1", m.Name, attrString(p.Attributes), p.Count)
						}
						k := key{m.Name, typ.AsString()}
						got[k] = append(got[k], p.Sum)
					}
				}
			}
		}
		for _, c := range []struct {
			name, typ string
			min, max  time.Duration
		}{
			{jobqueueotel.MetricWait, "late", due - time.Second, due + elapsed + time.Second},
			{jobqueueotel.MetricDuration, "slow", runs, elapsed},
		} {
			v := got[key{c.name, c.typ}]
			if len(v) != 1 || v[0] < c.min.Seconds() || v[0] > c.max.Seconds() {
				t.Errorf("%s{type=%s} = %v, want one point of %v to %v seconds", c.name, c.typ, v, c.min.Seconds(), c.max.Seconds())
			}
		}
	})
}
