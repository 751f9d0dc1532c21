package jobqueueotel

// OpenTelemetry's messaging semantic conventions, which dashboards and
// backends read, beside the project's own attribute names.

import (
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/jobqueue/jobqueue/queue"
)

// MessagingSystem is the messaging.system of every span and measurement.
const MessagingSystem = "jobqueue"

// The messaging.operation.name of the spans and measurements.
const (
	// OperationEnqueue: the jobqueue.enqueue span and jobqueue.jobs.enqueued
	// (messaging.operation.type send).
	OperationEnqueue = "enqueue"
	// OperationWork: the jobqueue.work span, jobqueue.jobs.worked and
	// jobqueue.job.duration (messaging.operation.type process).
	OperationWork = "work"
	// OperationClaim: jobqueue.job.wait, measured at the claim.
	OperationClaim = "claim"
)

// semconvKeys are the messaging attributes the instruments set themselves:
// Config.Attributes may not hold them.
var semconvKeys = []attribute.Key{
	semconv.MessagingSystemKey, semconv.MessagingDestinationNameKey, semconv.MessagingOperationNameKey,
}

// workSemconv are the messaging attributes of job's work span.
func workSemconv(job *queue.JobRow) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.MessagingSystemKey.String(MessagingSystem),
		semconv.MessagingOperationName(OperationWork),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(job.Type),
		semconv.MessagingMessageID(strconv.FormatInt(job.ID, 10)),
	}
}

// enqueueSemconv are the messaging attributes of call's enqueue span: the
// destination when its jobs share a type (whatever their kinds), the
// message id of a single job written (or found, for a duplicate), and the
// batch's size for EnqueueMany and EnqueueManyTx.
func enqueueSemconv(call *queue.EnqueueCall) []attribute.KeyValue {
	kvs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(MessagingSystem),
		semconv.MessagingOperationName(OperationEnqueue),
		semconv.MessagingOperationTypeSend,
	}
	if typ, ok := sharedType(call.Jobs); ok {
		kvs = append(kvs, semconv.MessagingDestinationName(typ))
	}
	if len(call.Jobs) == 1 && call.Jobs[0].ID > 0 {
		kvs = append(kvs, semconv.MessagingMessageID(strconv.FormatInt(call.Jobs[0].ID, 10)))
	}
	if call.Many {
		kvs = append(kvs, semconv.MessagingBatchMessageCount(len(call.Jobs)))
	}
	return kvs
}

// sharedType returns the type of jobs when they all have the same.
func sharedType(jobs []queue.EnqueuedJob) (string, bool) {
	if len(jobs) == 0 {
		return "", false
	}
	for _, j := range jobs[1:] {
		if j.Type != jobs[0].Type {
			return "", false
		}
	}
	return jobs[0].Type, true
}
