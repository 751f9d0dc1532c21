package queue

import (
	"errors"
	"time"

	"github.com/jobqueue/jobqueue/internal/policy"
)

// Outcome names how an attempt ended, so that logs, listeners (Event.Outcome)
// and telemetry count the ends of attempts by one vocabulary.
type Outcome string

// The outcomes of an attempt. decideOutcome gives every one but completed
// (the handler succeeded) and lost (the attempt no longer held its job when
// its end was written, so nothing changed; see EventLost).
const (
	// OutcomeCompleted: the handler succeeded and the completion was written.
	OutcomeCompleted Outcome = "completed"
	// OutcomeRetried: the job is pending again, at once or after a delay.
	OutcomeRetried Outcome = "retried"
	// OutcomeFailed: failed for good (permanent error or attempts used up).
	OutcomeFailed Outcome = "failed"
	// OutcomeExpired: the job's deadline had passed.
	OutcomeExpired Outcome = "expired"
	// OutcomeCancelled: a user cancelled the job (Queue.Cancel) while the
	// attempt ran; the attempt was fenced off.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeLost: the attempt had lost its job (its lease ran out and the
	// job was reclaimed, retried or deleted); its result changed nothing.
	OutcomeLost Outcome = "lost"
)

// Outcomes returns every outcome (a new slice each time).
func Outcomes() []Outcome {
	return []Outcome{OutcomeCompleted, OutcomeRetried, OutcomeFailed, OutcomeExpired, OutcomeCancelled, OutcomeLost}
}

// causeKind is why an attempt ended without success.
type causeKind int

const (
	// causeHandlerError: the handler returned an error or panicked.
	causeHandlerError causeKind = iota + 1
	// causeReleased: the worker gave the attempt up at shutdown.
	causeReleased
	// causeReclaimed: the attempt's lease ran out (its worker stopped or
	// was lost) and Reclaim ended it.
	causeReclaimed
	// causeCancelled: a user cancelled the job.
	causeCancelled
)

// endCause is why an attempt ended without success, with the handler's
// error for causeHandlerError.
type endCause struct {
	kind causeKind
	err  error
}

// handlerFailed is the cause of an attempt whose handler returned err.
func handlerFailed(err error) endCause { return endCause{kind: causeHandlerError, err: err} }

// The error texts stored with attempts that did not end by their handler.
const (
	releaseError = "interrupted: the worker shut down before the attempt finished"
	reclaimError = "the attempt's lease ran out before it finished (worker stopped or lost); reclaimed"
	cancelError  = "cancelled"
)

// attemptEnd is what decideOutcome decided for an attempt: the values its
// row gets (its claim token and lease are cleared too). It is comparable, so
// that attempts with equal ends are written by one statement.
type attemptEnd struct {
	outcome Outcome
	status  Status
	errText string
	// retryAt is when the job may run again (OutcomeRetried); zero leaves
	// scheduled_at as it was.
	retryAt time.Time
	// finishedAt is set for failed, expired and cancelled jobs; zero is NULL.
	finishedAt time.Time
}

// decideOutcome is the one rule for an attempt of job that ends at now
// without success (SPEC section 3), whatever ended it:
//   - cancelled → failed, error "cancelled";
//   - else its deadline has passed → expired;
//   - else its attempts are used up, or the handler failed permanently
//     (Permanent) → failed;
//   - else pending again (retried): for a handler error at now + the delay
//     of RetryAfter or of the policy's backoff min(base × 2^(attempts−1),
//     max); for a release or a reclaim at once.
//
// failed and expired jobs get finished_at = now and keep scheduled_at. It
// reads only job's Attempts, MaxAttempts, BaseDelay, MaxDelay and
// ExpiresAt.
func decideOutcome(job *JobRow, cause endCause, now time.Time) attemptEnd {
	e := attemptEnd{errText: causeText(cause)}
	var ra *RetryAfterError
	handler := cause.kind == causeHandlerError
	switch {
	case cause.kind == causeCancelled:
		e.outcome, e.status = OutcomeCancelled, StatusFailed
	case job.ExpiresAt != nil && !job.ExpiresAt.After(now):
		e.outcome, e.status = OutcomeExpired, StatusExpired
	case job.Attempts >= job.MaxAttempts || (handler && IsPermanent(cause.err)):
		e.outcome, e.status = OutcomeFailed, StatusFailed
	case handler && errors.As(cause.err, &ra):
		e.outcome, e.status, e.retryAt = OutcomeRetried, StatusPending, now.Add(max(ra.Delay, 0))
	case handler:
		wait := policy.Backoff(int64(job.Attempts), int64(job.BaseDelay/time.Second), int64(job.MaxDelay/time.Second))
		e.outcome, e.status, e.retryAt = OutcomeRetried, StatusPending, now.Add(wait)
	default:
		e.outcome, e.status, e.retryAt = OutcomeRetried, StatusPending, now
	}
	if e.status != StatusPending {
		e.finishedAt = now
	}
	return e
}

// causeText is the error text stored for cause.
func causeText(cause endCause) string {
	switch cause.kind {
	case causeReleased:
		return releaseError
	case causeReclaimed:
		return reclaimError
	case causeCancelled:
		return cancelError
	default:
		return errorText(cause.err)
	}
}

// groupEnds decides the end of each job's attempt and groups the attempts
// by equal ends (a handful per batch, since the jobs share now and cause),
// in a stable order, so that each group is written by one statement.
func groupEnds(jobs []*JobRow, cause endCause, now time.Time) ([]attemptEnd, map[attemptEnd][]attemptRef) {
	var order []attemptEnd
	groups := map[attemptEnd][]attemptRef{}
	for _, j := range jobs {
		e := decideOutcome(j, cause, now)
		if _, ok := groups[e]; !ok {
			order = append(order, e)
		}
		groups[e] = append(groups[e], j.ref())
	}
	return order, groups
}

// nullableTime is t for a nullable column: zero is NULL.
func nullableTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
