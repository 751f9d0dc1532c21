package jobqueueotel

// The metric attributes, made once per type (and outcome) and reused, so
// that recording a measurement allocates nothing of its own.

import (
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/jobqueue/jobqueue/queue"
)

// The attributes of the instruments: a job's type (its queue) and the
// outcome of an attempt. Never its id or kind.
const (
	// AttrType is the job's type, on every instrument.
	AttrType = attribute.Key("type")
	// AttrOutcome is how an attempt ended (a queue.Outcome), on
	// jobqueue.jobs.worked and jobqueue.job.duration.
	AttrOutcome = attribute.Key("outcome")
)

// attrKey names one set of attributes; outcome is "" for the type alone.
type attrKey struct {
	typ     string
	outcome queue.Outcome
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

// ofType is the options of the attribute set {type}.
func (c *attrCache) ofType(typ string) *measureOpts { return c.of(typ, "") }

// of is the options of {type, outcome} ({type} when outcome is "").
func (c *attrCache) of(typ string, outcome queue.Outcome) *measureOpts {
	k := attrKey{typ, outcome}
	c.mu.RLock()
	o, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	kvs := append(slices.Clip(c.extra), AttrType.String(typ))
	if outcome != "" {
		kvs = append(kvs, AttrOutcome.String(string(outcome)))
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
