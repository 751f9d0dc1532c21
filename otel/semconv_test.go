package jobqueueotel_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// TestSpanSemconvAttributes: the spans carry OpenTelemetry's messaging
// semantic conventions beside the project's own attributes:
// messaging.system, .operation.name and .operation.type on every span,
// .destination.name (the type) when the jobs share it, whatever their
// kinds, .message.id (the
// job's id) for one job, and .batch.message_count for EnqueueMany. (The
// instruments' messaging attributes are checked by every test that
// collects them: recorded.collect.) Before, the spans had only the
// jobqueue.* names.
func TestSpanSemconvAttributes(t *testing.T) {
	ctx := context.Background()
	e := testdb.New(t, engine.SQLite)
	rec := newRecorded(t)
	q, _ := openQueue(t, e, rec.tel.QueueOptions()...)
	one, err := q.Enqueue(ctx, task{"ok"}, queue.Type("mail"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(ctx, []queue.JobArgs{task{"ok"}, task{"ok"}}, queue.Type("mail")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(ctx, []queue.JobArgs{task{"ok"}}, queue.Type("sms")); err != nil {
		t.Fatal(err)
	}
	// Two kinds of one type: no jobqueue.job.kind, but the destination.
	if _, err := q.EnqueueMany(ctx, []queue.JobArgs{task{"ok"}, gaugeJob{}}, queue.Type("mail")); err != nil {
		t.Fatal(err)
	}
	w := q.NewWorker(queue.WorkerConfig{Types: []string{"sms"}, MaxJobs: 1, MaintenanceInterval: -1})
	queue.Handle(w, func(context.Context, *queue.Job[task]) error { return nil })
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.List(ctx, queue.ListFilter{Type: "sms"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("List(sms) = %v, %v; want one job", jobs, err)
	}
	worked := strconv.FormatInt(jobs[0].ID, 10)

	// The messaging attributes of each span, in the order they ended.
	var got []map[string]string
	for _, s := range rec.spans.Ended() {
		m := map[string]string{"span": s.Name()}
		for _, kv := range s.Attributes() {
			if k := string(kv.Key); len(k) > 10 && k[:10] == "messaging." {
				m[k] = kv.Value.Emit()
			}
		}
		got = append(got, m)
	}
	enqueue := func(kvs ...attribute.KeyValue) map[string]string {
		m := map[string]string{"span": jobqueueotel.SpanEnqueue, "messaging.system": "jobqueue",
			"messaging.operation.name": "enqueue", "messaging.operation.type": "send"}
		for _, kv := range kvs {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		return m
	}
	want := []map[string]string{
		enqueue(attribute.String("messaging.destination.name", "mail"), attribute.String("messaging.message.id", strconv.FormatInt(one, 10))),
		enqueue(attribute.String("messaging.destination.name", "mail"), attribute.Int("messaging.batch.message_count", 2)),
		enqueue(attribute.String("messaging.destination.name", "sms"), attribute.Int("messaging.batch.message_count", 1)),
		enqueue(attribute.String("messaging.destination.name", "mail"), attribute.Int("messaging.batch.message_count", 2)),
		{"span": jobqueueotel.SpanWork, "messaging.system": "jobqueue", "messaging.operation.name": "work",
			"messaging.operation.type": "process", "messaging.destination.name": "sms", "messaging.message.id": worked},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the spans' messaging attributes (-want +got):\n%s", diff)
	}
}
