package jobqueueotel_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	_ "modernc.org/sqlite"

	"github.com/jobqueue/jobqueue/migrations"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// Instrument a queue: New takes the service's TracerProvider and
// MeterProvider (the global ones when left nil), and QueueOptions gives
// queue.New the middleware and the listener that make the spans and feed
// the instruments. Here the providers record in memory; a service passes
// the ones its exporters (OTLP, Prometheus, …) read.
func Example() {
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
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	tel, err := jobqueueotel.New(jobqueueotel.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(db, append(tel.QueueOptions(), queue.WithTable("jobs"))...)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	if _, err := q.Enqueue(ctx, task{Do: "ok"}, queue.Type("email")); err != nil {
		log.Fatal(err)
	}
	w := q.NewWorker(queue.WorkerConfig{MaxJobs: 1})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[task]) error {
		return nil // ctx carries the jobqueue.work span: spans started here are its children
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	for _, s := range spans.Ended() {
		fmt.Println("span:", s.Name(), s.SpanKind())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					fmt.Printf("%s{%s} %d\n", m.Name, attrString(p.Attributes), p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					fmt.Printf("%s{%s} %d measurement(s), unit %s\n", m.Name, attrString(p.Attributes), p.Count, m.Unit)
				}
			}
		}
	}
	// Output:
	// span: jobqueue.enqueue producer
	// span: jobqueue.work consumer
	// jobqueue.jobs.enqueued{in_tx=false,messaging.destination.name=email,messaging.operation.name=enqueue,messaging.system=jobqueue,type=email} 1
	// jobqueue.jobs.worked{messaging.destination.name=email,messaging.operation.name=work,messaging.system=jobqueue,outcome=completed,type=email} 1
	// jobqueue.job.duration{messaging.destination.name=email,messaging.operation.name=work,messaging.system=jobqueue,outcome=completed,type=email} 1 measurement(s), unit s
	// jobqueue.job.wait{messaging.destination.name=email,messaging.operation.name=claim,messaging.system=jobqueue,type=email} 1 measurement(s), unit s
}
