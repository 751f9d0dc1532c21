package jobqueueotel_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/jobqueue/jobqueue/migrations"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// ExampleGaugeOptions_onError sends the gauges' failed reads of the table
// to the service's own log (GaugeOptions.OnError) rather than to
// OpenTelemetry's process-wide error handler: once per failed read, however
// often the gauges are collected meanwhile. Here the table is gone; the
// collects return no error and observe no gauge.
func ExampleGaugeOptions_onError() {
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
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch {
			case a.Key == slog.TimeKey:
				return slog.Attr{} // a steady output
			case a.Key == "err":
				// The driver's own words vary; keep what this example shows.
				return slog.Bool("no_such_table", strings.Contains(a.Value.String(), "no such table: jobs"))
			}
			return a
		},
	}))
	if _, err := tel.RegisterGauges(q, jobqueueotel.GaugeOptions{OnError: func(err error) {
		logger.Warn("reading the jobs table for the gauges failed", "err", err)
	}}); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE jobs"); err != nil {
		log.Fatal(err)
	}

	for range 2 { // the second collect, within the TTL, reads nothing
		var rm metricdata.ResourceMetrics
		err := reader.Collect(ctx, &rm)
		fmt.Println("collect error:", err)
	}
	// Output:
	// level=WARN msg="reading the jobs table for the gauges failed" no_such_table=true
	// collect error: <nil>
	// collect error: <nil>
}
