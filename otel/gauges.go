package jobqueueotel

// The gauges jobqueue.jobs (jobs per type and status) and
// jobqueue.oldest_pending.age (how long the oldest due pending job of each
// type has waited), observed from the queue's reads through a cache: one
// read of the table serves every collect for GaugeOptions.TTL, so the
// database is asked at most once per TTL whatever the scrape or export
// rate. A read is the types (Queue.Types, one index probe each), then per
// type its counts (Queue.Stats, or Queue.StatsUpTo with a CountLimit) and
// its oldest due pending job (Queue.OldestDue): generated queries that
// read the (type, status, scheduled_at, id) index (an exact count of a type
// holding much of the table PostgreSQL's planner may make a sequential
// scan; CountLimit bounds it).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/jobqueue/jobqueue/queue"
)

// Defaults of GaugeOptions.
const (
	// DefaultGaugeTTL is how long one read of the table serves collects.
	DefaultGaugeTTL = 5 * time.Second
	// DefaultGaugeMaxTypes is how many types the gauges observe at most.
	DefaultGaugeMaxTypes = 100
	// DefaultGaugeTimeout bounds one read of the table.
	DefaultGaugeTimeout = 10 * time.Second
)

// The gauges' names, as SPEC section 11 gives them (in the Prometheus text
// format: jobqueue_jobs and jobqueue_oldest_pending_age_seconds).
const (
	// MetricJobs is the gauge of the jobs per type and status.
	MetricJobs = "jobqueue.jobs"
	// MetricOldestPendingAge is the gauge of the seconds since the oldest
	// due pending job of each type was due.
	MetricOldestPendingAge = "jobqueue.oldest_pending.age"
)

// AttrStatus is the attribute of jobqueue.jobs that holds a job's status
// (with AttrType).
const AttrStatus = attribute.Key("status")

// GaugeOptions configures Telemetry.RegisterGauges; the zero value means
// the defaults.
type GaugeOptions struct {
	// TTL is how long one read of the table serves collects (0 means
	// DefaultGaugeTTL). A failed read is kept as long, so that a database
	// that is down is not asked on every scrape either.
	TTL time.Duration
	// MaxTypes bounds how many types (the first, in byte order) are
	// observed, and so the gauges' cardinality (0 means
	// DefaultGaugeMaxTypes). The types beyond it are left out, which is
	// reported once, to OnError or else through otel.Handle.
	MaxTypes int
	// CountLimit, above 0, stops each count at that many jobs
	// (Queue.StatsUpTo), which bounds a read's cost on a table of millions
	// of rows; a gauge equal to it then means "that many or more". 0 counts
	// every job (Queue.Stats).
	CountLimit int64
	// Timeout bounds one read of the table (0 means DefaultGaugeTimeout):
	// some collectors, such as the Prometheus exporter, collect with a
	// context that has no deadline.
	Timeout time.Duration
	// OnError, when set, hears each failed read of the table (once per
	// read: a failed read is kept for the TTL and not heard again until
	// the next one fails) and the warning that the types exceed
	// MaxTypes; a collect then observes no gauge and returns no error, so
	// that nothing reaches OpenTelemetry's process-wide error handler.
	// Nil: the callback returns the read's error to the SDK on every
	// collect, whose exporter hands it to otel.Handle, as it does the
	// warning. It is called within a collect, the read's lock held: it
	// should return quickly (log, count) and must not collect.
	OnError func(error)
	// Attributes are added to every point of the gauges, beside type and
	// status and the Telemetry's Config.Attributes (a key in both takes
	// the value given here): a Telemetry that observes several queues
	// gives each attributes of its own, such as attribute.String("table",
	// "jobs"), since the points of two queues under the same attributes
	// would overwrite each other (RegisterGauges refuses that). Neither
	// type nor status may be one of them.
	Attributes []attribute.KeyValue
}

// Gauges are the registered observable gauges of one queue; Unregister
// removes them.
type Gauges struct {
	q     *queue.Queue
	o     GaugeOptions
	reg   metric.Registration
	extra []attribute.KeyValue // the point's attributes but type and status, sorted
	keys  *gaugeKeys           // the Telemetry's, where extra's set is reserved
	key   attribute.Distinct   // extra's set

	jobs metric.Int64ObservableGauge
	age  metric.Float64ObservableGauge

	mu     sync.Mutex // held during a read, so that collects at once share it
	readAt time.Time  // when the last read ended; zero before the first
	snap   []typeSnapshot
	err    error // the last read's error, kept with it for the TTL
	warned bool  // MaxTypes was exceeded and that reported
}

// typeSnapshot is what one read found for one type.
type typeSnapshot struct {
	typ    string
	counts map[queue.Status]int64
	age    float64 // seconds; 0 when no pending job is due
}

// RegisterGauges creates the gauges jobqueue.jobs (jobs per type and
// status, unit {job}, attributes type and status) and
// jobqueue.oldest_pending.age (seconds since the oldest due pending job of
// each type was due, 0 when none is; unit s, attribute type) on the
// Telemetry's MeterProvider, observed from q's table through a cache (see
// GaugeOptions), with the Telemetry's Config.Attributes and o.Attributes
// beside. Every type present in the table has all five statuses, zeros
// included. No job id or kind is an attribute. The Telemetry refuses a
// second queue's gauges under the same attributes while the first's are
// registered; two Telemetry values on one MeterProvider cannot see each
// other's gauges, so give each Config.Attributes of its own (as their
// counters need too).
func (t *Telemetry) RegisterGauges(q *queue.Queue, o GaugeOptions) (*Gauges, error) {
	if q == nil {
		return nil, errors.New("jobqueue: gauges: the queue is nil; pass the *queue.Queue whose table they observe")
	}
	switch {
	case o.TTL < 0:
		return nil, fmt.Errorf("jobqueue: gauges: TTL %s is negative; use 0 for %s", o.TTL, DefaultGaugeTTL)
	case o.MaxTypes < 0:
		return nil, fmt.Errorf("jobqueue: gauges: MaxTypes %d is negative; use 0 for %d", o.MaxTypes, DefaultGaugeMaxTypes)
	case o.CountLimit < 0:
		return nil, fmt.Errorf("jobqueue: gauges: CountLimit %d is negative; use 0 to count every job", o.CountLimit)
	case o.Timeout < 0:
		return nil, fmt.Errorf("jobqueue: gauges: Timeout %s is negative; use 0 for %s", o.Timeout, DefaultGaugeTimeout)
	}
	for _, kv := range o.Attributes {
		switch {
		case !kv.Valid():
			return nil, fmt.Errorf("jobqueue: gauges: attribute %q is not valid (an empty key or no value); give each a key and a value", kv.Key)
		case kv.Key == AttrType || kv.Key == AttrStatus:
			return nil, fmt.Errorf("jobqueue: gauges: attribute %q is the gauges' own; name yours otherwise, such as \"table\"", kv.Key)
		}
	}
	if o.TTL == 0 {
		o.TTL = DefaultGaugeTTL
	}
	if o.MaxTypes == 0 {
		o.MaxTypes = DefaultGaugeMaxTypes
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultGaugeTimeout
	}
	// NewSet keeps the last of a key given twice: o's over Config's.
	set := attribute.NewSet(append(slices.Clone(t.attrs.extra), o.Attributes...)...)
	g := &Gauges{q: q, o: o, extra: set.ToSlice(), keys: &t.gauges, key: set.Equivalent()}
	if !g.keys.reserve(g.key, g) {
		return nil, fmt.Errorf("jobqueue: gauges: this Telemetry already observes another queue's gauges under the attributes %v, "+
			"and the two would overwrite each other's points; give each queue GaugeOptions.Attributes of its own, "+
			"such as attribute.String(\"table\", %q), or Unregister the other first", g.extra, q.Table())
	}
	if err := g.register(t.meter); err != nil {
		g.keys.release(g.key, g)
		return nil, err
	}
	return g, nil
}

// register creates the gauges and registers their callback.
func (g *Gauges) register(m metric.Meter) error {
	var err error
	if g.jobs, err = m.Int64ObservableGauge(MetricJobs,
		metric.WithDescription("Jobs in the table per type and status, read at most once per cache TTL."),
		metric.WithUnit("{job}")); err != nil {
		return fmt.Errorf("jobqueue: gauges: create %s: %w", MetricJobs, err)
	}
	if g.age, err = m.Float64ObservableGauge(MetricOldestPendingAge,
		metric.WithDescription("Seconds since the oldest due pending job of the type was due (0 when none is), read at most once per cache TTL."),
		metric.WithUnit("s")); err != nil {
		return fmt.Errorf("jobqueue: gauges: create %s: %w", MetricOldestPendingAge, err)
	}
	if g.reg, err = m.RegisterCallback(g.observe, g.jobs, g.age); err != nil {
		return fmt.Errorf("jobqueue: gauges: register their callback: %w", err)
	}
	return nil
}

// Unregister removes the gauges' callback: the table is not read any more
// and the gauges are no longer observed; the Telemetry may then observe
// another queue under the same attributes.
func (g *Gauges) Unregister() error {
	if err := g.reg.Unregister(); err != nil {
		return fmt.Errorf("jobqueue: gauges: unregister: %w", err)
	}
	g.keys.release(g.key, g)
	return nil
}

// observe is the gauges' callback: it observes the cached read, reading
// the table first when the cache is older than the TTL.
func (g *Gauges) observe(ctx context.Context, o metric.Observer) error {
	snap, err := g.cached(ctx)
	if err != nil {
		if g.o.OnError != nil {
			return nil // heard by OnError when it was read
		}
		return err
	}
	n := len(g.extra)
	attrs := make([]attribute.KeyValue, n+2)
	copy(attrs, g.extra)
	for _, t := range snap {
		attrs[n] = AttrType.String(t.typ)
		for _, s := range queue.Statuses() {
			attrs[n+1] = AttrStatus.String(string(s))
			o.ObserveInt64(g.jobs, t.counts[s], metric.WithAttributes(attrs...))
		}
		o.ObserveFloat64(g.age, t.age, metric.WithAttributes(attrs[:n+1]...))
	}
	return nil
}

// cached returns the last read while it is younger than the TTL, else
// reads the table again.
func (g *Gauges) cached(ctx context.Context) ([]typeSnapshot, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.readAt.IsZero() && time.Since(g.readAt) < g.o.TTL {
		return g.snap, g.err
	}
	rctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	g.snap, g.err = g.read(rctx)
	g.readAt = time.Now()
	if g.err != nil && g.o.OnError != nil {
		g.o.OnError(g.err)
	}
	return g.snap, g.err
}

// report hands err to OnError, or to otel.Handle when there is none.
func (g *Gauges) report(err error) {
	if g.o.OnError != nil {
		g.o.OnError(err)
		return
	}
	otel.Handle(err)
}

// read reads the types, then each type's counts and oldest due job.
func (g *Gauges) read(ctx context.Context) ([]typeSnapshot, error) {
	types, more, err := g.q.Types(ctx, g.o.MaxTypes)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: gauges: %w", err)
	}
	if more && !g.warned {
		g.warned = true
		g.report(fmt.Errorf("jobqueue: gauges: the table has more than %d types; only the first %d are observed (raise GaugeOptions.MaxTypes)", g.o.MaxTypes, g.o.MaxTypes))
	}
	out := make([]typeSnapshot, 0, len(types))
	for _, typ := range types {
		var counts map[queue.Status]int64
		if g.o.CountLimit > 0 {
			counts, err = g.q.StatsUpTo(ctx, typ, g.o.CountLimit)
		} else {
			counts, err = g.q.Stats(ctx, typ)
		}
		if err != nil {
			return nil, fmt.Errorf("jobqueue: gauges: type %q: %w", typ, err)
		}
		oldest, err := g.q.OldestDue(ctx, typ)
		if err != nil {
			return nil, fmt.Errorf("jobqueue: gauges: type %q: %w", typ, err)
		}
		var age float64
		if oldest != nil {
			age = max(time.Since(oldest.ScheduledAt).Seconds(), 0)
		}
		out = append(out, typeSnapshot{typ: typ, counts: counts, age: age})
	}
	return out, nil
}
