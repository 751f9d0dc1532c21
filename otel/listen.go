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
//
// An attempt its worker did not end within its lease (the worker died, or
// was alive but late) is counted in jobqueue.jobs.worked as lost, once, by
// the process whose Reclaim ended it (EventReclaimed; no duration is
// known), whatever Reclaim wrote for the job (retried or failed). The late
// worker's own EventLost (queue.OutcomeLost: Reclaim had ended the
// attempt, or will once its lease passes) is not counted again, whichever
// of the two events comes first and in whichever process; only its
// handler's duration is recorded, in jobqueue.job.duration under lost.
//
// A cancelled attempt (queue.OutcomeCancelled) is counted once, as
// cancelled, split by its lease when it was cancelled: one whose lease
// still ran by the worker that ran it (its EventLost), one whose lease had
// passed (its worker presumed dead) by the process whose Cancel ended it
// (EventCancelled, per type; no duration is known there). A worker that
// was alive after all, only late, hears EventLost with CountedByCancel:
// its handler's duration is recorded under cancelled, the attempt not
// counted again.
// An attempt given back unstarted (Event.GivenBack: the worker stopped
// while it waited in the buffer ahead) is not an attempt there, as in the
// table's attempts; its claim was measured in jobqueue.job.wait, and the
// job's next claim is measured again from the same scheduled_at.
func (t *Telemetry) Listen(ev queue.Event) {
	t.listen(&t.spans, ev)
}

// listen is Listen taking the attempts' work spans from spans.
func (t *Telemetry) listen(spans *attemptSpans, ev queue.Event) {
	ctx := context.Background()
	if ev.Kind == queue.EventReclaimed {
		// Attempts whose worker did not end them within their lease (it
		// was killed, say, or late: its EventLost does not count them):
		// lost, whatever Reclaim wrote for the job.
		for _, r := range ev.Reclaimed {
			t.worked.Add(ctx, r.Count, t.attrs.worked(r.Type, queue.OutcomeLost).add...)
		}
		return
	}
	if ev.Kind == queue.EventCancelled {
		// Attempts whose lease had passed when they were cancelled:
		// their workers, presumed dead, do not count them.
		for _, c := range ev.Cancelled {
			t.worked.Add(ctx, c.Count, t.attrs.worked(c.Type, queue.OutcomeCancelled).add...)
		}
		return
	}
	if ev.Job == nil {
		return
	}
	switch ev.Kind {
	case queue.EventClaimed:
		wait := max(time.Since(ev.Job.ScheduledAt), 0)
		t.wait.Record(ctx, wait.Seconds(), t.attrs.wait(ev.Job.Type).record...)
	case queue.EventCompleted, queue.EventFailed, queue.EventLost:
		if ev.GivenBack {
			// Never started: the table does not count the attempt.
			return
		}
		// In the attempt's work span, for the SDK's exemplars.
		ctx := spans.take(ev.Job.ID)
		a := t.attrs.worked(ev.Job.Type, ev.Outcome)
		if ev.Outcome != queue.OutcomeLost && !ev.CountedByCancel {
			// A lost attempt is Reclaim's to count, and one cancelled
			// after its lease passed its canceller's: counted once.
			t.worked.Add(ctx, 1, a.add...)
		}
		t.duration.Record(ctx, ev.Duration.Seconds(), a.record...)
	}
}
