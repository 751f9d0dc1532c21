package jobqueueotel

// The metric attributes, made once per type (and outcome) and reused, so
// that recording a measurement allocates nothing of its own.

import (
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/jobqueue/jobqueue/queue"
)

// The attributes of the instruments: a job's type (its queue), the
// outcome of an attempt, and whether jobs were enqueued in the caller's
// transaction. Never its id or kind.
const (
	// AttrType is the job's type, on every instrument.
	AttrType = attribute.Key("type")
	// AttrOutcome is how an attempt ended (a queue.Outcome), on
	// jobqueue.jobs.worked and jobqueue.job.duration.
	AttrOutcome = attribute.Key("outcome")
	// AttrInTx is on jobqueue.jobs.enqueued: true for the jobs written in
	// a transaction still open when they were counted, which may yet roll
	// back: the caller's (EnqueueTx, EnqueueManyTx; a *sql.Tx tells no one
	// of its commit) or the leader's act that enqueues a periodic job's
	// tick (tried again after a conflict, and rolled back when the
	// leadership is lost); false for the jobs Enqueue and EnqueueMany
	// committed before they returned, which exist once counted.
	AttrInTx = attribute.Key("in_tx")
)

// instrument names the instruments whose attribute sets differ.
type instrument int

const (
	instEnqueued instrument = iota + 1 // jobqueue.jobs.enqueued: type, in_tx
	instWorked                         // jobqueue.jobs.worked and jobqueue.job.duration: type, outcome
	instWait                           // jobqueue.job.wait: type
)

// operation is the messaging.operation.name of the instrument's
// measurements.
func (i instrument) operation() string {
	switch i {
	case instEnqueued:
		return OperationEnqueue
	case instWorked:
		return OperationWork
	default:
		return OperationClaim
	}
}

// attrKey names one set of attributes.
type attrKey struct {
	inst    instrument
	typ     string
	outcome queue.Outcome // instWorked only
	inTx    bool          // instEnqueued only
}

// measureOpts are the options of one attribute set, for Add and Record.
type measureOpts struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// attrCache holds the options of every attribute set seen. Types and
// outcomes are few, so it stays small.
type attrCache struct {
	extra []attribute.KeyValue // Config.Attributes, on every set
	mu    sync.RWMutex
	m     map[attrKey]*measureOpts
}

// enqueued is the options of jobqueue.jobs.enqueued's set {type, in_tx}.
func (c *attrCache) enqueued(typ string, inTx bool) *measureOpts {
	return c.of(attrKey{inst: instEnqueued, typ: typ, inTx: inTx})
}

// worked is the options of jobqueue.jobs.worked's and
// jobqueue.job.duration's set {type, outcome}.
func (c *attrCache) worked(typ string, outcome queue.Outcome) *measureOpts {
	return c.of(attrKey{inst: instWorked, typ: typ, outcome: outcome})
}

// wait is the options of jobqueue.job.wait's set {type}.
func (c *attrCache) wait(typ string) *measureOpts {
	return c.of(attrKey{inst: instWait, typ: typ})
}

// of is the options of the set k names.
func (c *attrCache) of(k attrKey) *measureOpts {
	c.mu.RLock()
	o, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	kvs := append(slices.Clip(c.extra), AttrType.String(k.typ),
		semconv.MessagingSystemKey.String(MessagingSystem),
		semconv.MessagingDestinationName(k.typ),
		semconv.MessagingOperationName(k.inst.operation()))
	switch k.inst {
	case instEnqueued:
		kvs = append(kvs, AttrInTx.Bool(k.inTx))
	case instWorked:
		kvs = append(kvs, AttrOutcome.String(string(k.outcome)))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.m[k]; ok {
		return o
	}
	if c.m == nil {
		c.m = map[attrKey]*measureOpts{}
	}
	o = &measureOpts{add: []metric.AddOption{opt}, record: []metric.RecordOption{opt}}
	c.m[k] = o
	return o
}
