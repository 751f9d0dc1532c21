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

// GaugeOptions configures RegisterGauges; the zero value means the
// defaults.
type GaugeOptions struct {
	// MeterProvider creates the gauges; nil means the global one
	// (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider
	// TTL is how long one read of the table serves collects (0 means
	// DefaultGaugeTTL). A failed read is kept as long, so that a database
	// that is down is not asked on every scrape either.
	TTL time.Duration
	// MaxTypes bounds how many types (the first, in byte order) are
	// observed, and so the gauges' cardinality (0 means
	// DefaultGaugeMaxTypes). The types beyond it are left out, which is
	// reported once through otel.Handle.
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
}

// Gauges are the registered observable gauges of one queue; Unregister
// removes them.
type Gauges struct {
	q   *queue.Queue
	o   GaugeOptions
	reg metric.Registration

	jobs metric.Int64ObservableGauge
	age  metric.Float64ObservableGauge

	mu     sync.Mutex // held during a read, so that collects at once share it
	readAt time.Time  // when the last read ended; zero before the first
	snap   []typeSnapshot
	err    error // the last read's error, kept with it for the TTL
	warned bool  // MaxTypes was exceeded and otel.Handle told
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
// each type was due, 0 when none is; unit s, attribute type) on o's
// MeterProvider, observed from q's table through a cache (see GaugeOptions).
// Every type present in the table has all five statuses, zeros included.
// No job id or kind is an attribute.
func RegisterGauges(q *queue.Queue, o GaugeOptions) (*Gauges, error) {
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
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
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
	g := &Gauges{q: q, o: o}
	m := o.MeterProvider.Meter(ScopeName)
	var err error
	if g.jobs, err = m.Int64ObservableGauge(MetricJobs,
		metric.WithDescription("Jobs in the table per type and status, read at most once per cache TTL."),
		metric.WithUnit("{job}")); err != nil {
		return nil, fmt.Errorf("jobqueue: gauges: create %s: %w", MetricJobs, err)
	}
	if g.age, err = m.Float64ObservableGauge(MetricOldestPendingAge,
		metric.WithDescription("Seconds since the oldest due pending job of the type was due (0 when none is), read at most once per cache TTL."),
		metric.WithUnit("s")); err != nil {
		return nil, fmt.Errorf("jobqueue: gauges: create %s: %w", MetricOldestPendingAge, err)
	}
	if g.reg, err = m.RegisterCallback(g.observe, g.jobs, g.age); err != nil {
		return nil, fmt.Errorf("jobqueue: gauges: register their callback: %w", err)
	}
	return g, nil
}

// Unregister removes the gauges' callback: the table is not read any more
// and the gauges are no longer observed.
func (g *Gauges) Unregister() error {
	if err := g.reg.Unregister(); err != nil {
		return fmt.Errorf("jobqueue: gauges: unregister: %w", err)
	}
	return nil
}

// observe is the gauges' callback: it observes the cached read, reading
// the table first when the cache is older than the TTL.
func (g *Gauges) observe(ctx context.Context, o metric.Observer) error {
	snap, err := g.cached(ctx)
	if err != nil {
		return err
	}
	for _, t := range snap {
		typ := AttrType.String(t.typ)
		for _, s := range queue.Statuses() {
			o.ObserveInt64(g.jobs, t.counts[s], metric.WithAttributes(typ, AttrStatus.String(string(s))))
		}
		o.ObserveFloat64(g.age, t.age, metric.WithAttributes(typ))
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
	return g.snap, g.err
}

// read reads the types, then each type's counts and oldest due job.
func (g *Gauges) read(ctx context.Context) ([]typeSnapshot, error) {
	types, more, err := g.q.Types(ctx, g.o.MaxTypes)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: gauges: %w", err)
	}
	if more && !g.warned {
		g.warned = true
		otel.Handle(fmt.Errorf("jobqueue: gauges: the table has more than %d types; only the first %d are observed (raise GaugeOptions.MaxTypes)", g.o.MaxTypes, g.o.MaxTypes))
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
