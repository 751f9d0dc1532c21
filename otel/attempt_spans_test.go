package jobqueueotel

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestAttemptSpansBounded: the spans kept for the ends of attempts stop at
// maxAttemptSpans (ends never heard, of attempts whose result was not
// written, cannot grow it without bound), the oldest making room for the
// newest; a span not sampled is not kept; take forgets what it returns.
func TestAttemptSpansBounded(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	var a attemptSpans
	for id := range int64(maxAttemptSpans + 10) {
		a.put(id, sampled)
	}
	a.put(-1, sampled.WithTraceFlags(0))
	if n := a.order.Len(); n != maxAttemptSpans || len(a.m) != n {
		t.Errorf("%d spans kept (%d in order), want %d", len(a.m), n, maxAttemptSpans)
	}
	for _, c := range []struct {
		id   int64
		kept bool
	}{
		{0, false}, {9, false}, {10, true}, {maxAttemptSpans + 9, true}, {-1, false},
	} {
		got := trace.SpanContextFromContext(a.take(c.id)).IsValid()
		if got != c.kept {
			t.Errorf("take(%d) has a span: %v, want %v", c.id, got, c.kept)
		}
	}
	if trace.SpanContextFromContext(a.take(10)).IsValid() {
		t.Error("take(10) a second time still has the span")
	}
	if ctx := a.take(12345678); ctx != context.Background() {
		t.Errorf("take of an id never put = %v, want context.Background()", ctx)
	}
}

// TestAttemptSpansLeftBehindMakeRoom: the spans of attempts whose end is
// never heard (their result not written: an outage, a stop) stay until
// the bound is reached; past it the oldest make room for a new attempt,
// whose end then has its span. Before, a full map refused every new
// attempt: a worker that went through outages worth maxAttemptSpans
// unheard ends recorded no exemplar ever after.
func TestAttemptSpansLeftBehindMakeRoom(t *testing.T) {
	sc := func(id int64) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{byte(id), byte(id >> 8), byte(id >> 16), 1}, TraceFlags: trace.FlagsSampled})
	}
	var a attemptSpans
	for id := range int64(maxAttemptSpans) { // never taken: left behind
		a.put(id, sc(id))
	}
	a.put(5, sc(5)) // put again (a new attempt of job 5): now the newest
	const fresh = maxAttemptSpans + 1
	a.put(fresh, sc(fresh))
	for _, c := range []struct {
		id   int64
		kept bool
	}{
		{fresh, true},               // the new attempt, kept
		{0, false},                  // the oldest, evicted for it
		{1, true},                   // the next oldest, still there
		{5, true},                   // put again, so not the oldest
		{maxAttemptSpans - 1, true}, // recent
	} {
		got := trace.SpanContextFromContext(a.take(c.id))
		if got.IsValid() != c.kept {
			t.Errorf("take(%d) has a span: %v, want %v", c.id, got.IsValid(), c.kept)
		}
		if c.kept && got.IsValid() && !got.Equal(sc(c.id)) {
			t.Errorf("take(%d) = span %v, want its own %v", c.id, got.SpanID(), sc(c.id).SpanID())
		}
	}
}
