package jobqueueotel

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestAttemptSpansBounded: the spans kept for the ends of attempts stop at
// maxAttemptSpans (ends never heard, of attempts whose result was not
// written, cannot grow it without bound); a span not sampled is not kept;
// take forgets what it returns.
func TestAttemptSpansBounded(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	var a attemptSpans
	for id := range int64(maxAttemptSpans + 10) {
		a.put(id, sampled)
	}
	a.put(-1, sampled.WithTraceFlags(0))
	for _, c := range []struct {
		id   int64
		kept bool
	}{
		{0, true}, {maxAttemptSpans - 1, true}, {maxAttemptSpans, false}, {-1, false},
	} {
		got := trace.SpanContextFromContext(a.take(c.id)).IsValid()
		if got != c.kept {
			t.Errorf("take(%d) has a span: %v, want %v", c.id, got, c.kept)
		}
	}
	if trace.SpanContextFromContext(a.take(0)).IsValid() {
		t.Error("take(0) a second time still has the span")
	}
	if ctx := a.take(12345678); ctx != context.Background() {
		t.Errorf("take of an id never put = %v, want context.Background()", ctx)
	}
}
