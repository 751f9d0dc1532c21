package jobqueueotel

// The work span of each attempt, kept from its start (WorkMiddleware) to
// the event that ends it (Listen), so that the measurements of its end are
// recorded in the span's context and the SDK can attach exemplars (the
// trace_based filter keeps those of sampled spans). The queue emits that
// event after the middleware returned, from the completer or the executor,
// with no context of the attempt.

import (
	"container/list"
	"context"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// maxAttemptSpans bounds the spans kept: the end of an attempt whose
// result the worker could not write is never heard here (Reclaim ends
// it), so an outage could leave entries behind. Past the bound the oldest
// entry (most likely one of those) makes room for the new one.
const maxAttemptSpans = 1 << 14

// attemptSpans maps a job's id to the span context of this process's
// latest attempt of it, for one queue (QueueOptions makes one per queue:
// job ids are per table). A job has one attempt at a time in a process, but
// for a late one whose job was claimed again here: the later overwrites
// the earlier, whose end then gets the later's exemplar or none.
type attemptSpans struct {
	mu sync.Mutex
	m  map[int64]*list.Element // of order
	// order holds the kept entries (*attemptSpan), the oldest put first.
	order list.List
}

// attemptSpan is one kept entry: a job's id and its attempt's span.
type attemptSpan struct {
	id int64
	sc trace.SpanContext
}

// put keeps sc for job id when it is sampled (the only spans exemplars
// link to), as the newest entry; at the bound it forgets the oldest.
func (a *attemptSpans) put(id int64, sc trace.SpanContext) {
	if !sc.IsSampled() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[int64]*list.Element{}
	}
	if e, ok := a.m[id]; ok {
		e.Value.(*attemptSpan).sc = sc
		a.order.MoveToBack(e)
		return
	}
	if len(a.m) >= maxAttemptSpans {
		oldest := a.order.Front()
		a.order.Remove(oldest)
		delete(a.m, oldest.Value.(*attemptSpan).id)
	}
	a.m[id] = a.order.PushBack(&attemptSpan{id: id, sc: sc})
}

// take returns a context carrying the span kept for job id, forgetting
// it, or context.Background() when none is kept.
func (a *attemptSpans) take(id int64) context.Context {
	a.mu.Lock()
	e, ok := a.m[id]
	if ok {
		delete(a.m, id)
		a.order.Remove(e)
	}
	a.mu.Unlock()
	if !ok {
		return context.Background()
	}
	return trace.ContextWithSpanContext(context.Background(), e.Value.(*attemptSpan).sc)
}
