package jobqueueotel

// The attribute sets under which one Telemetry's gauges are registered,
// kept by the Telemetry (no package-level registry), so that a second
// queue's gauges under the same set are refused.

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
)

// gaugeKeys maps each attribute set under which a Telemetry's gauges are
// registered to the Gauges registered under it. Two queues' gauges under
// one set would observe the same points (type "default" in both tables,
// say), and each collect would keep one table's value.
type gaugeKeys struct {
	mu sync.Mutex
	m  map[attribute.Distinct]*Gauges
}

// reserve records g under k, or returns false when other gauges hold k.
func (r *gaugeKeys) reserve(k attribute.Distinct, g *Gauges) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, held := r.m[k]; held {
		return false
	}
	if r.m == nil {
		r.m = map[attribute.Distinct]*Gauges{}
	}
	r.m[k] = g
	return true
}

// release forgets k when g holds it (a second Unregister of g leaves the
// gauges registered under k since alone).
func (r *gaugeKeys) release(k attribute.Distinct, g *Gauges) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[k] == g {
		delete(r.m, k)
	}
}
