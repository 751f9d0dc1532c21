package main

// /metrics in the Prometheus text format, for `work --metrics-addr` and
// `web`: an OpenTelemetry MeterProvider whose one reader is the Prometheus
// exporter, on a registry of its own (no target_info, no otel_scope_*
// labels, the usual suffixes: _total, _seconds), so that the instruments of
// SPEC section 11 appear as jobqueue_jobs_enqueued_total,
// jobqueue_jobs_worked_total, jobqueue_job_duration_seconds,
// jobqueue_job_wait_seconds, jobqueue_jobs and
// jobqueue_oldest_pending_age_seconds. Prometheus stays here, in the
// command: neither queue nor web links it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// metricsPath is where the metrics are served.
const metricsPath = "/metrics"

// promMetrics is a MeterProvider exported as the Prometheus text format,
// and the telemetry on it.
type promMetrics struct {
	provider *sdkmetric.MeterProvider
	tel      *jobqueueotel.Telemetry // its QueueOptions instrument the queue
	handler  http.Handler            // serves the registry's metrics
	gauges   *jobqueueotel.Gauges
	log      *slog.Logger // where the gauges' failed reads are told
}

// newPromMetrics creates the provider, the telemetry on it and its
// handler; a failed read of the gauges' table is logged in log as a
// warning (GaugeOptions.OnError, once per read), not through
// OpenTelemetry's process-wide error handler, which the command leaves
// alone so that two of these in one process (or tests) log each to its
// own log. What the SDK or the exporter still reports through otel.Handle
// (none of this package's doing) goes to that handler's default, the
// standard logger on stderr.
func newPromMetrics(log *slog.Logger) (*promMetrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithoutTargetInfo(),
		otelprom.WithoutScopeInfo(),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
	)
	if err != nil {
		return nil, fmt.Errorf("set up the Prometheus exporter: %w", err)
	}
	m := &promMetrics{
		log:      log,
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		// A point the registry refuses (a label value that is not
		// UTF-8, say) is left out and the rest served; the refusal is
		// logged, not dropped.
		handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}),
	}
	if m.tel, err = jobqueueotel.New(jobqueueotel.Config{MeterProvider: m.provider}); err != nil {
		return nil, errors.Join(err, m.provider.Shutdown(context.Background()))
	}
	return m, nil
}

// observe registers q's gauges (jobs per type and status, the oldest due
// pending job's age per type), read at most once per
// jobqueueotel.DefaultGaugeTTL whatever the scrape rate, each count
// stopping at countLimit when it is above 0 (--metrics-count-limit).
func (m *promMetrics) observe(q *queue.Queue, countLimit int64) error {
	g, err := m.tel.RegisterGauges(q, jobqueueotel.GaugeOptions{CountLimit: countLimit, OnError: func(err error) {
		m.log.Warn("metrics: "+err.Error(), "path", metricsPath)
	}})
	if err != nil {
		return err
	}
	m.gauges = g
	return nil
}

// close stops the gauges and the provider.
func (m *promMetrics) close(ctx context.Context) error {
	var errs []error
	if m.gauges != nil {
		errs = append(errs, m.gauges.Unregister())
	}
	errs = append(errs, m.provider.Shutdown(ctx))
	return errors.Join(errs...)
}

// checkAddr checks the HOST:PORT of flag (a usage error naming it, before
// anything is opened): a port from 0 (any free one) to 65535.
func checkAddr(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n int
		if n, err = strconv.Atoi(port); err == nil && (n < 0 || n > 65535) {
			err = errors.New("the port is out of range")
		}
	}
	if err != nil {
		return usagef("bad %s %q: give HOST:PORT, such as 127.0.0.1:9090 (port 0 picks a free one)", flag, addr)
	}
	return nil
}

// countLimitFlag is the help of --metrics-count-limit.
const countLimitFlag = "stop each count of the jobqueue_jobs gauge at N jobs (a bounded index read on a table of millions of rows; N means N or more); 0 counts every job"

// checkCountLimit checks --metrics-count-limit.
func checkCountLimit(n int64) error {
	if n < 0 {
		return usagef("--metrics-count-limit %d must not be negative; use 0 to count every job", n)
	}
	return nil
}

// metricsServer serves /metrics on a listener of its own (work
// --metrics-addr).
type metricsServer struct {
	srv  *http.Server
	done chan error
}

// serveMetrics listens on addr (of --metrics-addr) and serves h at
// /metrics (404 elsewhere) until stop; it logs the URL, with the port
// picked when addr's is 0.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics: listen on %s: %w; pick another --metrics-addr (port 0 picks a free one)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(metricsPath, h)
	s := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+metricsPath)
	return s, nil
}

// stop shuts the server down, giving scrapes in flight until ctx ends.
func (s *metricsServer) stop(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down the metrics server: %w", err)
	}
	if err := <-s.done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}

// workMetrics are the metrics of `work --metrics-addr`: the telemetry's
// counters and histograms of the jobs this process enqueues and works, and
// the table's gauges, on a server of their own.
type workMetrics struct {
	m            *promMetrics
	queueOptions []queue.Option // instrument the queue (jobqueueotel.Telemetry)
	srv          *metricsServer
	log          *slog.Logger
}

// newWorkMetrics makes the provider and the telemetry whose options the
// queue is opened with.
func newWorkMetrics(log *slog.Logger) (*workMetrics, error) {
	m, err := newPromMetrics(log)
	if err != nil {
		return nil, err
	}
	return &workMetrics{m: m, queueOptions: m.tel.QueueOptions(), log: log}, nil
}

// serve registers q's gauges (see promMetrics.observe) and serves /metrics
// on addr.
func (w *workMetrics) serve(q *queue.Queue, addr string, countLimit int64) error {
	if err := w.m.observe(q, countLimit); err != nil {
		return err
	}
	srv, err := serveMetrics(addr, w.m.handler, w.log)
	if err != nil {
		return err
	}
	w.srv = srv
	return nil
}

// stop shuts the server down, giving scrapes in flight 5 seconds.
func (w *workMetrics) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.srv.stop(ctx); err != nil {
		w.log.Warn(err.Error())
	}
}

// close stops the gauges and the provider.
func (w *workMetrics) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.m.close(ctx); err != nil {
		w.log.Warn("metrics: " + err.Error())
	}
}
