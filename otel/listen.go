package jobqueueotel

// The instruments fed by the queue's events: attempts ended (worked,
// duration) and claimed (wait).

import (
	"context"
	"time"

	"github.com/jobqueue/jobqueue/queue"
)

// Listen is the queue listener (queue.WithListener) that feeds the
// instruments: each claim records jobqueue.job.wait (from the job's
// scheduled_at to now), and each end of an attempt (EventCompleted,
// EventFailed, EventLost) counts it in jobqueue.jobs.worked and records how
// long its handler ran in jobqueue.job.duration, by type and outcome.
func (t *Telemetry) Listen(ev queue.Event) {
	if ev.Job == nil {
		return
	}
	ctx := context.Background()
	switch ev.Kind {
	case queue.EventClaimed:
		wait := max(time.Since(ev.Job.ScheduledAt), 0)
		t.wait.Record(ctx, wait.Seconds(), t.attrs.ofType(ev.Job.Type).record...)
	case queue.EventCompleted, queue.EventFailed, queue.EventLost:
		a := t.attrs.of(ev.Job.Type, ev.Outcome)
		t.worked.Add(ctx, 1, a.add...)
		t.duration.Record(ctx, ev.Duration.Seconds(), a.record...)
	}
}
