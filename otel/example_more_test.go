package jobqueueotel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobqueue/jobqueue/migrations"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// To trace the handlers of some workers only, give the queue the enqueue
// middleware and the listener (which feeds the instruments) as options of
// their own, and put WorkMiddleware in those workers' Middleware. A work
// span carries the job's id, kind, type and attempt, and the handler's
// error, and the messaging semantic conventions' attributes;
// jobqueue.jobs.worked counts each attempt by type and outcome (with
// messaging.system, messaging.destination.name, messaging.operation.name).
func ExampleTelemetry_WorkMiddleware() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-otel-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := migrations.Install(ctx, db, "jobs"); err != nil {
		log.Fatal(err)
	}

	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tel, err := jobqueueotel.New(jobqueueotel.Config{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(db, queue.WithEnqueueMiddleware(tel.EnqueueMiddleware), queue.WithListener(tel.Listen))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Enqueue(ctx, task{Do: "fail"}, queue.Type("billing")); err != nil {
		log.Fatal(err)
	}

	w := q.NewWorker(queue.WorkerConfig{MaxJobs: 1, Middleware: []queue.WorkMiddleware{tel.WorkMiddleware}})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[task]) error {
		return errors.New("card declined")
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	for _, s := range spans.Ended() {
		if s.Name() != jobqueueotel.SpanWork {
			continue
		}
		fmt.Println(s.Name(), s.SpanKind(), s.Status().Code, s.Status().Description)
		for _, kv := range s.Attributes() {
			fmt.Printf("  %s=%s\n", kv.Key, kv.Value.Emit())
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == jobqueueotel.MetricWorked {
				for _, p := range d.DataPoints {
					fmt.Printf("%s{%s} %d\n", m.Name, attrString(p.Attributes), p.Value)
				}
			}
		}
	}
	// Output:
	// jobqueue.work consumer Error card declined
	//   jobqueue.job.id=1
	//   jobqueue.job.kind=task
	//   jobqueue.job.type=billing
	//   jobqueue.job.attempt=1
	//   messaging.system=jobqueue
	//   messaging.operation.name=work
	//   messaging.operation.type=process
	//   messaging.destination.name=billing
	//   messaging.message.id=1
	// jobqueue.jobs.worked{messaging.destination.name=billing,messaging.operation.name=work,messaging.system=jobqueue,outcome=retried,type=billing} 1
}
