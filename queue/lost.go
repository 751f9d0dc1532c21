package queue

// The end of an attempt that had lost its job (its result changed
// nothing): EventLost, with the outcome that tells a cancelled job from
// one whose lease ran out.

import (
	"context"
	"time"
)

// lost emits EventLost for the attempt of row (as claimed) that ended, its
// handler having returned err after dur (0: it never started), without
// holding its job. lease is the lease_until the worker last wrote for the
// attempt (attempt.leaseWritten). Only when a listener hears it does it
// read the job once to tell the outcome (lostOutcome), and for a cancelled
// attempt whether the canceller counted it (CountedByCancel: its lease had
// passed at the cancel's finished_at, cancelCountedByCanceller); the
// attempts that lose their jobs are few, so this costs the hot path
// nothing.
func (q *Queue) lost(ctx context.Context, row *JobRow, lease time.Time, err error, dur time.Duration) {
	if !q.listening() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	defer cancel()
	now, readErr := q.Get(ctx, row.ID)
	out := lostOutcome(row, now)
	if readErr != nil {
		q.logger.Debug("reading the job of a lost attempt failed; counting it lost", "job_id", row.ID, "err", readErr)
	}
	ev := *row
	if now != nil {
		ev = *now
	}
	byCancel := out == OutcomeCancelled && now.FinishedAt != nil && cancelCountedByCanceller(&lease, *now.FinishedAt)
	q.emit(Event{Kind: EventLost, Job: &ev, Err: err, Outcome: out, Duration: dur, CountedByCancel: byCancel})
}

// claimedLease is the lease_until a claim wrote for row (zero when it
// read none back).
func claimedLease(row *JobRow) time.Time {
	if row.LeaseUntil == nil {
		return time.Time{}
	}
	return *row.LeaseUntil
}

// lostOutcome is the outcome of the attempt of claimed (as claimed) that
// lost its job, given the job as it is now (nil: gone or unread): cancelled
// when Cancel ended that very attempt (the job failed with the cancel
// error, its attempts and scheduled_at unchanged since the claim), else
// lost. A Reclaim that ended the attempt first (pending again) moved
// scheduled_at to its now, which is past the lease and so past the claimed
// scheduled_at whatever the clocks: a Cancel of the pending job after it
// ended no attempt, and the attempt is the Reclaim's, lost.
func lostOutcome(claimed, now *JobRow) Outcome {
	if now != nil && now.Status == StatusFailed && now.Error == cancelError &&
		now.Attempts == claimed.Attempts && now.ScheduledAt.Equal(claimed.ScheduledAt) {
		return OutcomeCancelled
	}
	return OutcomeLost
}
