package jobqueueotel_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"

	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// TestEnqueueSpanMiddlewareMistakes: the enqueue span and the enqueued
// counter say what a middleware that breaks next's contract made of the
// enqueue, on the three engines. Inside the telemetry's middleware, one
// that returns nil without calling next (nothing written) makes the span
// an error and counts nothing, like the error the caller gets; one that
// calls next twice makes the span an error too (the jobs were written
// once, by the first call). Outside it, a middleware that calls next twice
// makes two spans: the first a success, counting the job once, the second
// an error. Before, a skipped next was caught only after the chain had
// returned, so the span saw success and the job was counted although
// nothing was written.
func TestEnqueueSpanMiddlewareMistakes(t *testing.T) {
	skips := func(context.Context, *queue.EnqueueCall, queue.EnqueueFunc) error { return nil }
	twice := func(ctx context.Context, call *queue.EnqueueCall, next queue.EnqueueFunc) error {
		if err := next(ctx, call); err != nil {
			return err
		}
		return next(ctx, call)
	}
	cases := []struct {
		name string
		// chain is the middleware, tel's among them.
		chain func(tel *jobqueueotel.Telemetry) []queue.EnqueueMiddleware
		// errPart is in the caller's error and in the last span's status.
		errPart string
		// spans are the enqueue spans' status codes in the order they ended.
		spans []codes.Code
		// counted is jobqueue.jobs.enqueued, rows the rows written.
		counted, rows int64
	}{
		{"skips next, inside", func(tel *jobqueueotel.Telemetry) []queue.EnqueueMiddleware {
			return []queue.EnqueueMiddleware{tel.EnqueueMiddleware, skips}
		}, "without calling next", []codes.Code{codes.Error}, 0, 0},
		{"calls next twice, inside", func(tel *jobqueueotel.Telemetry) []queue.EnqueueMiddleware {
			return []queue.EnqueueMiddleware{tel.EnqueueMiddleware, twice}
		}, "called next a second time", []codes.Code{codes.Error}, 0, 1},
		{"calls next twice, outside", func(tel *jobqueueotel.Telemetry) []queue.EnqueueMiddleware {
			return []queue.EnqueueMiddleware{twice, tel.EnqueueMiddleware}
		}, "called next a second time", []codes.Code{codes.Unset, codes.Error}, 1, 1},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rec := newRecorded(t)
				q, _ := openQueue(t, e, queue.WithEnqueueMiddleware(c.chain(rec.tel)...))
				_, err := q.Enqueue(context.Background(), task{Do: "ok"}, queue.Type("mail"))
				if err == nil || !strings.Contains(err.Error(), c.errPart) {
					t.Errorf("Enqueue: err %v, want one saying %q", err, c.errPart)
				}
				var got []codes.Code
				var last string
				for _, s := range rec.spans.Ended() {
					if s.Name() == jobqueueotel.SpanEnqueue {
						got = append(got, s.Status().Code)
						last = s.Status().Description
					}
				}
				if len(got) != len(c.spans) {
					t.Fatalf("enqueue spans with status %v, want %v", got, c.spans)
				}
				for i := range got {
					if got[i] != c.spans[i] {
						t.Errorf("enqueue spans with status %v, want %v", got, c.spans)
						break
					}
				}
				if !strings.Contains(last, c.errPart) {
					t.Errorf("last enqueue span's status %q, want one saying %q", last, c.errPart)
				}
				if n := rec.collect(t)[jobqueueotel.MetricEnqueued]["in_tx=false,type=mail"]; n != c.counted {
					t.Errorf("%s{in_tx=false,type=mail} = %d, want %d", jobqueueotel.MetricEnqueued, n, c.counted)
				}
				rows, err := q.Stats(context.Background(), "")
				if err != nil {
					t.Fatal(err)
				}
				var n int64
				for _, v := range rows {
					n += v
				}
				if n != c.rows {
					t.Errorf("%d rows written, want %d", n, c.rows)
				}
			})
		}
	})
}

// TestEnqueueSpanPanic: an enqueue that panics inside the telemetry's
// middleware (a middleware of the service's, or the write) ends its span
// with status Error saying so, besides the exception event, and counts
// nothing; the panic goes on to the caller. Before, the span ended with
// status Unset, so a trace backend's error view did not show it.
func TestEnqueueSpanPanic(t *testing.T) {
	boom := func(context.Context, *queue.EnqueueCall, queue.EnqueueFunc) error { panic("boom") }
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		rec := newRecorded(t)
		q, _ := openQueue(t, e, queue.WithEnqueueMiddleware(rec.tel.EnqueueMiddleware, boom))
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Errorf("Enqueue panicked with %v, want the middleware's boom", p)
				}
			}()
			_, err := q.Enqueue(context.Background(), task{Do: "ok"}, queue.Type("mail"))
			t.Errorf("Enqueue returned (%v) instead of panicking", err)
		}()
		spans := rec.spans.Ended()
		if len(spans) != 1 || spans[0].Name() != jobqueueotel.SpanEnqueue {
			t.Fatalf("ended spans %v, want one %s", spans, jobqueueotel.SpanEnqueue)
		}
		if st := spans[0].Status(); st.Code != codes.Error || !strings.Contains(st.Description, "boom") {
			t.Errorf("the span of a panicking enqueue has status %v %q, want Error saying boom", st.Code, st.Description)
		}
		if n := rec.collect(t)[jobqueueotel.MetricEnqueued]["in_tx=false,type=mail"]; n != 0 {
			t.Errorf("%s{in_tx=false,type=mail} = %d after a panic, want 0", jobqueueotel.MetricEnqueued, n)
		}
	})
}
