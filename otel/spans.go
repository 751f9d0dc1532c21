package jobqueueotel

// The spans: jobqueue.enqueue around every enqueue, jobqueue.work around
// every handler call (the middleware of the queue package).

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobqueue/jobqueue/queue"
)

// The attributes of the spans.
const (
	// AttrJobID is the job's id: on a work span, and on an enqueue span
	// of one job once written (the existing job's, for a duplicate).
	AttrJobID = attribute.Key("jobqueue.job.id")
	// AttrJobKind is the job's kind (its name column): on a work span, and
	// on an enqueue span whose jobs all share it.
	AttrJobKind = attribute.Key("jobqueue.job.kind")
	// AttrJobType is the job's type (its queue): on a work span, and on an
	// enqueue span whose jobs all share it, with AttrJobKind.
	AttrJobType = attribute.Key("jobqueue.job.type")
	// AttrJobAttempt is the attempt's number, 1 for the first, on a work
	// span.
	AttrJobAttempt = attribute.Key("jobqueue.job.attempt")
	// AttrJobCount is the number of jobs of an enqueue span.
	AttrJobCount = attribute.Key("jobqueue.jobs.count")
	// AttrJobDuplicate is true on the enqueue span of one job whose unique
	// key another live job held, so that nothing was written.
	AttrJobDuplicate = attribute.Key("jobqueue.job.duplicate")
)

// WorkMiddleware is the queue.WorkMiddleware that runs each handler in a
// jobqueue.work span (SpanKindConsumer) with the job's id, kind, type and
// attempt; a handler error (or panic) is recorded on the span, whose status
// is then Error. It keeps the span's context (when sampled) until Listen
// hears the attempt's end, whose measurements it then carries (exemplars);
// it keeps them by job id, so that jobs of two tables with one id, run at
// once through one Telemetry's WorkMiddleware, share an entry (their ends'
// exemplars may be mixed up): QueueOptions keeps each queue's apart.
func (t *Telemetry) WorkMiddleware(ctx context.Context, job *queue.JobRow, next queue.WorkFunc) error {
	return t.work(ctx, &t.spans, job, next)
}

// work is WorkMiddleware keeping the span in spans.
func (t *Telemetry) work(ctx context.Context, spans *attemptSpans, job *queue.JobRow, next queue.WorkFunc) error {
	ctx, span := t.tracer.Start(ctx, SpanWork, t.consumer...)
	defer span.End()
	spans.put(job.ID, span.SpanContext()) // the listener measures the attempt's end in it
	if span.IsRecording() {
		// Set on the span (one copy), not passed to Start (two).
		span.SetAttributes(
			AttrJobID.Int64(job.ID),
			AttrJobKind.String(job.Name),
			AttrJobType.String(job.Type),
			AttrJobAttempt.Int(job.Attempts),
		)
		span.SetAttributes(workSemconv(job)...)
	}
	err := next(ctx, job)
	if err != nil {
		recordError(span, err)
	}
	return err
}

// recordError records err on span (the exception event) and makes the
// span's status Error with err's text. It never panics: a handler may
// return a nil pointer as a non-nil error (whose Error method then reads
// through nil), or an error whose Error method panics; the queue stores a
// text for those, and the telemetry must not turn them into a panic of its
// own.
func recordError(span trace.Span, err error) {
	text, ok := errorText(err)
	if ok {
		span.RecordError(err) // calls Error again
	} else {
		span.AddEvent("exception", trace.WithAttributes(
			attribute.String("exception.type", fmt.Sprintf("%T", err)),
			attribute.String("exception.message", text)))
	}
	span.SetStatus(codes.Error, text)
}

// errorText is err's text, and false with a text saying so when its Error
// method panics.
func errorText(err error) (text string, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			text, ok = fmt.Sprintf("a %T whose Error method panicked: %v", err, p), false
		}
	}()
	return err.Error(), true
}

// EnqueueMiddleware is the queue.EnqueueMiddleware that writes each enqueue
// in a jobqueue.enqueue span (SpanKindProducer) and counts the jobs written
// in jobqueue.jobs.enqueued. The span has the number of jobs, the kind and
// type when all jobs share them, the id of a single job, and the error of a
// failed enqueue (a duplicate of a unique key is not a failure: it is marked
// jobqueue.job.duplicate). A panic inside it makes the span an error and
// goes on.
func (t *Telemetry) EnqueueMiddleware(ctx context.Context, call *queue.EnqueueCall, next queue.EnqueueFunc) error {
	ctx, span := t.tracer.Start(ctx, SpanEnqueue, t.producer...)
	defer span.End() // records a panic as an exception event
	defer func() {
		// A panic of the rest of the chain (no recover there, unlike the
		// work chain's) goes on to the caller, its span an error.
		if p := recover(); p != nil {
			span.SetStatus(codes.Error, fmt.Sprintf("panic: %v", p))
			panic(p)
		}
	}()
	err := next(ctx, call)
	if span.IsRecording() {
		attrs := []attribute.KeyValue{AttrJobCount.Int(len(call.Jobs))}
		if kind, typ, same := shared(call.Jobs); same {
			attrs = append(attrs, AttrJobKind.String(kind), AttrJobType.String(typ))
		}
		attrs = append(attrs, enqueueSemconv(call)...)
		if len(call.Jobs) == 1 && call.Jobs[0].ID > 0 {
			attrs = append(attrs, AttrJobID.Int64(call.Jobs[0].ID))
		}
		if len(call.Jobs) == 1 && call.Jobs[0].Duplicate {
			attrs = append(attrs, AttrJobDuplicate.Bool(true))
		}
		span.SetAttributes(attrs...)
	}
	if err != nil && !errors.Is(err, queue.ErrDuplicate) {
		recordError(span, err)
		return err
	}
	if err == nil {
		t.countEnqueued(ctx, call.Jobs, call.Tx != nil)
	}
	return err
}

// shared returns the kind and type of jobs when they all have the same.
func shared(jobs []queue.EnqueuedJob) (kind, typ string, same bool) {
	if len(jobs) == 0 {
		return "", "", false
	}
	kind, typ = jobs[0].Kind, jobs[0].Type
	for _, j := range jobs[1:] {
		if j.Kind != kind || j.Type != typ {
			return "", "", false
		}
	}
	return kind, typ, true
}

// countEnqueued adds the jobs written (not the duplicates) to
// jobqueue.jobs.enqueued, one Add per run of jobs of one type, with in_tx
// true when they were written in the caller's transaction (tx), whose
// commit the queue does not see.
func (t *Telemetry) countEnqueued(ctx context.Context, jobs []queue.EnqueuedJob, tx bool) {
	var n int64
	typ := ""
	for i, j := range jobs {
		if i > 0 && j.Type != typ && n > 0 {
			t.enqueued.Add(ctx, n, t.attrs.enqueued(typ, tx).add...)
			n = 0
		}
		typ = j.Type
		if !j.Duplicate {
			n++
		}
	}
	if n > 0 {
		t.enqueued.Add(ctx, n, t.attrs.enqueued(typ, tx).add...)
	}
}
