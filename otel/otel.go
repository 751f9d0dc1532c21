// Package jobqueueotel instruments a queue (github.com/jobqueue/jobqueue/queue)
// with OpenTelemetry: a span per enqueue and per attempt, and the
// instruments of the queue's contract (SPEC section 11). It is a package of
// its own so that the queue package does not depend on OpenTelemetry; it
// uses only the OpenTelemetry API, and the service brings the SDK and the
// exporters.
//
// Open it with New and hand its options to queue.New:
//
//	tel, err := jobqueueotel.New(jobqueueotel.Config{}) // the global providers
//	q, err := queue.New(db, append(tel.QueueOptions(), queue.WithTable("jobs"))...)
//
// Spans:
//   - jobqueue.enqueue (SpanKindProducer), around every Enqueue, EnqueueTx,
//     EnqueueMany and EnqueueManyTx, with the job's kind, type and id (for
//     one job), the number of jobs, and the error if the enqueue failed.
//   - jobqueue.work (SpanKindConsumer), around every handler call, with the
//     job's id, kind, type and attempt (AttrJobID, AttrJobKind, AttrJobType,
//     AttrJobAttempt); on failure the error is recorded and the status is
//     Error. The handler runs in the span's context.
//
// Instruments (the meter named ScopeName):
//   - jobqueue.jobs.enqueued: counter of jobs written, attributes type
//     and in_tx (AttrInTx); duplicates of a unique key are not counted.
//     in_tx=false counts exactly the jobs that exist: Enqueue and
//     EnqueueMany commit before they return. in_tx=true counts the jobs of
//     EnqueueTx and EnqueueManyTx (and a leader's periodic jobs, written
//     in its fenced transaction) when written, before the transaction
//     ends: a *sql.Tx tells no one of its commit, so a rolled-back
//     transaction's jobs are counted too.
//   - jobqueue.jobs.worked: counter of attempts ended, attributes type and
//     outcome: completed, retried, failed, expired, cancelled or lost (see
//     queue.Outcome); a claimed job given back unstarted (queue.Event's
//     GivenBack) is not an attempt, as in the table. An attempt whose
//     worker did not end it within its lease (the worker died, or was
//     alive but late) is lost, counted once, by the process whose Reclaim
//     ends it (queue.Event's Reclaimed), whatever Reclaim wrote for the
//     job (retried or failed); the late worker's own EventLost records
//     its handler's time in jobqueue.job.duration only. A cancelled
//     attempt is counted once, as cancelled: by its worker (EventLost)
//     when its lease still ran at the cancel, else by the process whose
//     Cancel ended it (queue.EventCancelled: its worker is presumed dead;
//     one that was alive after all records only its handler's time,
//     EventLost with CountedByCancel).
//   - jobqueue.job.duration: histogram of how long the handlers ran,
//     seconds, attributes type and outcome (lost: handlers that returned
//     after their attempt had been reclaimed).
//   - jobqueue.job.wait: histogram of the time from a job's scheduled_at to
//     its claim, seconds, attribute type: one measurement per claim.
//
// OpenTelemetry's messaging semantic conventions are set beside the
// project's own names (which stay), for the dashboards that read them:
//   - on both spans: messaging.system "jobqueue" (MessagingSystem),
//     messaging.operation.name ("enqueue" or "work") and
//     messaging.operation.type ("send" or "process");
//     messaging.destination.name, the type (as jobqueue.job.type), when the
//     jobs share it; messaging.message.id, the job's id as a string (as
//     jobqueue.job.id), on a work span and on the enqueue span of one job;
//     messaging.batch.message_count on the span of EnqueueMany and
//     EnqueueManyTx (as jobqueue.jobs.count).
//   - on every measurement of the four instruments: messaging.system,
//     messaging.destination.name (the type, as type) and
//     messaging.operation.name: "enqueue" (jobqueue.jobs.enqueued), "work"
//     (jobqueue.jobs.worked, jobqueue.job.duration) or "claim"
//     (jobqueue.job.wait). In Prometheus they are the labels
//     messaging_system, messaging_destination_name and
//     messaging_operation_name.
//
// The gauges jobqueue.jobs and jobqueue.oldest_pending.age, read from the
// table, are registered apart, per queue, with Telemetry.RegisterGauges
// (with Config.Attributes, without the messaging attributes).
//
// Exemplars: the measurements are recorded in the context of the span
// they belong to, so that an SDK with the trace_based exemplar filter (its
// default) links a data point to a sampled trace: jobqueue.jobs.enqueued
// to the jobqueue.enqueue span, jobqueue.jobs.worked and
// jobqueue.job.duration to the attempt's jobqueue.work span (which the
// work middleware keeps, by job id, until the listener hears the attempt's
// end, apart for each queue given QueueOptions; at most 16384 per queue,
// past which the oldest, most likely an attempt whose end was never heard,
// is forgotten and its end, if heard, has no exemplar). A claim's
// jobqueue.job.wait comes before any span, and Reclaim's counts have none:
// they carry no exemplar.
//
// A job's id and kind are never metric attributes (their cardinality is
// unbounded); they are on the spans.
package jobqueueotel

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobqueue/jobqueue/queue"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/jobqueue/jobqueue/otel"

// The names of the spans and of the instruments.
const (
	// SpanEnqueue is the producer span around every enqueue.
	SpanEnqueue = "jobqueue.enqueue"
	// SpanWork is the consumer span around every handler call.
	SpanWork = "jobqueue.work"

	// MetricEnqueued counts the jobs written, by type.
	MetricEnqueued = "jobqueue.jobs.enqueued"
	// MetricWorked counts the attempts ended, by type and outcome.
	MetricWorked = "jobqueue.jobs.worked"
	// MetricDuration is the histogram of how long handlers ran, in
	// seconds, by type and outcome.
	MetricDuration = "jobqueue.job.duration"
	// MetricWait is the histogram of the time from a job's scheduled_at to
	// its claim, in seconds, by type.
	MetricWait = "jobqueue.job.wait"
)

// Config configures the telemetry. Its zero value uses the global
// providers (otel.GetTracerProvider, otel.GetMeterProvider).
type Config struct {
	// TracerProvider makes the tracer of the spans (nil: the global one).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter of the instruments (nil: the global
	// one).
	MeterProvider metric.MeterProvider
	// Attributes are added to every measurement of the instruments, beside
	// type and outcome, and to every point of the gauges (RegisterGauges):
	// a service that instruments several tables on one MeterProvider gives
	// each table's Telemetry attributes of its own, such as
	// attribute.String("table", "jobs"), else their counts add up per type
	// and their gauges overwrite each other. None of the instruments' own
	// (type, outcome, in_tx, status, the messaging ones) may be one of
	// them.
	Attributes []attribute.KeyValue
}

// Telemetry instruments queues: its options (QueueOptions) give a queue its
// spans and metrics, and RegisterGauges its gauges. One Telemetry may serve
// any number of queues, whose counts then add up per type
// (Config.Attributes tells tables apart); it is safe for concurrent use.
type Telemetry struct {
	tracer trace.Tracer
	meter  metric.Meter // of the instruments and the gauges
	// consumer and producer are the start options of the spans, made once.
	consumer []trace.SpanStartOption
	producer []trace.SpanStartOption
	enqueued metric.Int64Counter
	worked   metric.Int64Counter
	duration metric.Float64Histogram
	wait     metric.Float64Histogram
	attrs    attrCache
	// spans are the work spans of the attempts under way, for the
	// exemplars of their ends' measurements, of WorkMiddleware and Listen
	// (QueueOptions keeps each queue's apart).
	spans attemptSpans
	// gauges are the attribute sets of the gauges registered, each held by
	// one queue's.
	gauges gaugeKeys
}

// secondsBuckets are the bucket boundaries of the histograms, in seconds:
// from a millisecond to an hour.
var secondsBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// New makes the tracer and the instruments from cfg's providers. It fails
// when one of cfg.Attributes is refused or the meter refuses an
// instrument.
func New(cfg Config) (*Telemetry, error) {
	tp, mp := cfg.TracerProvider, cfg.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	for _, kv := range cfg.Attributes {
		switch {
		case !kv.Valid():
			return nil, fmt.Errorf("jobqueueotel: attribute %q is not valid (an empty key or no value); give each a key and a value", kv.Key)
		case kv.Key == AttrType || kv.Key == AttrOutcome || kv.Key == AttrInTx || kv.Key == AttrStatus || slices.Contains(semconvKeys, kv.Key):
			return nil, fmt.Errorf("jobqueueotel: attribute %q is the instruments' own; name yours otherwise, such as \"table\"", kv.Key)
		}
	}
	m := mp.Meter(ScopeName)
	t := &Telemetry{
		tracer:   tp.Tracer(ScopeName),
		meter:    m,
		consumer: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)},
		producer: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)},
	}
	extra := attribute.NewSet(slices.Clone(cfg.Attributes)...) // NewSet sorts its argument in place
	t.attrs.extra = extra.ToSlice()
	var errs []error
	var err error
	t.enqueued, err = m.Int64Counter(MetricEnqueued, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs enqueued (written), by type; in_tx=true: written in a transaction still open (the caller's, or a leader's), counted whether it then commits or not."))
	errs = append(errs, err)
	t.worked, err = m.Int64Counter(MetricWorked, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts ended, by type and outcome (completed, retried, failed, expired, cancelled, lost; lost: not ended by its worker within its lease, counted by the Reclaim that ended it)."))
	errs = append(errs, err)
	t.duration, err = m.Float64Histogram(MetricDuration, metric.WithUnit("s"),
		metric.WithDescription("How long handlers ran, by type and outcome."),
		metric.WithExplicitBucketBoundaries(secondsBuckets...))
	errs = append(errs, err)
	t.wait, err = m.Float64Histogram(MetricWait, metric.WithUnit("s"),
		metric.WithDescription("Time from a job's scheduled_at to its claim, by type."),
		metric.WithExplicitBucketBoundaries(secondsBuckets...))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("jobqueueotel: making the instruments: %w", err)
	}
	return t, nil
}

// QueueOptions are the options that instrument a queue: pass them to
// queue.New (with the queue's others), a call per queue. They add the
// enqueue and work middleware and a listener, after any the caller gives
// before them; the work spans they keep for the exemplars are the queue's
// own, since job ids are per table. To trace only some workers, use
// EnqueueMiddleware and Listen as options and put WorkMiddleware in those
// workers' WorkerConfig.Middleware instead (those share one Telemetry's
// spans: give each table a Telemetry of its own then).
func (t *Telemetry) QueueOptions() []queue.Option {
	spans := new(attemptSpans) // this queue's
	return []queue.Option{
		queue.WithEnqueueMiddleware(t.EnqueueMiddleware),
		queue.WithWorkMiddleware(func(ctx context.Context, job *queue.JobRow, next queue.WorkFunc) error {
			return t.work(ctx, spans, job, next)
		}),
		queue.WithListener(func(ev queue.Event) { t.listen(spans, ev) }),
	}
}
