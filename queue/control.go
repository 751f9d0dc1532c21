package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Job control (SPEC section 8): Cancel and Delete, for one job or many.

// Errors of Cancel, Delete and RetryMany, per id (see IDResult).
// ErrJobNotFound (api.go) and ErrDuplicate are the others.
var (
	// ErrJobFinished: Cancel found the job completed, failed or expired;
	// it was left unchanged.
	ErrJobFinished = errors.New("jobqueue: job already finished")
	// ErrJobRunning: Delete found the job in_progress and left it; cancel
	// it first (Cancel), then delete it.
	ErrJobRunning = errors.New("jobqueue: job is running")
	// ErrNotRetryable: RetryMany found the job neither failed nor expired
	// (pending, in_progress or completed); it was left unchanged.
	ErrNotRetryable = errors.New("jobqueue: job not retryable")
)

// IDResult is the result of a bulk action for one id; Err nil means done.
// Err wraps ErrJobNotFound, ErrJobFinished or ErrJobRunning (test with
// errors.Is) and says what to do.
type IDResult struct {
	// ID is the job id the result is for.
	ID int64
	// Err is nil when the action was done, else why not.
	Err error
}

// controlBatch is how many ids one control statement handles at most.
const controlBatch = 1000

// cancelOutcome is what Cancel leaves behind at now, by the outcome rule
// (decideOutcome with causeCancelled, which reads nothing of the job):
// failed, with the error "cancelled" and finished_at now (SPEC section 8).
// Retry runs the job again.
func cancelOutcome(now time.Time) attemptEnd {
	return decideOutcome(&JobRow{}, endCause{kind: causeCancelled}, now)
}

// Cancel stops the job with the given id: a pending job becomes failed at
// once with the error "cancelled" (finished_at now); an in_progress job
// likewise, and its claim token is cleared, so that the running attempt is
// fenced off (its completion or failure changes nothing and is told
// ErrLeaseLost). The worker running it cancels the handler's context at its
// next heartbeat, and at once on PostgreSQL (the queue notifies the
// table's channel), unless WorkerConfig.PollOnly; a worker of this Queue
// does so at once on every engine, PollOnly or not. A job that a worker of
// this Queue has claimed but not started yet never starts once Cancel has
// returned, on every engine (its executor reads the job first). A worker
// of another Queue or process reads a job it claimed a second or more
// before it starts it, so a job cancelled from elsewhere starts only within
// a second of its claim (its handler's context is then cancelled as a
// running one's). Retry runs a cancelled job again.
//
// A job that is completed, failed or expired is left unchanged and the
// error wraps ErrJobFinished; a missing id gives ErrJobNotFound, and an id
// that is not positive ErrInvalidID (nothing is then written).
func (q *Queue) Cancel(ctx context.Context, id int64) error {
	if err := checkIDs("cancel", []int64{id}); err != nil {
		return err
	}
	res, err := q.CancelMany(ctx, []int64{id})
	if err != nil {
		return err
	}
	return res[0].Err
}

// CancelMany is Cancel for many ids, one statement per batch of at most
// 1000 ids, and returns a result per id, in the order given (an id given
// twice gets the same result twice). The error is non-nil only when the
// database failed, the results then covering the ids before the failed
// batch, or when an id is not positive: it then wraps ErrInvalidID, names
// the id, and nothing was done for any of the ids.
func (q *Queue) CancelMany(ctx context.Context, ids []int64) ([]IDResult, error) {
	if err := checkIDs("cancel many", ids); err != nil {
		return nil, err
	}
	var cancelled []int64
	counted := map[string]int64{} // attempts this Cancel counts, per type
	res, err := q.control(ctx, ids, func(ctx context.Context, batch []int64) (map[int64]bool, map[int64]Status, error) {
		o := cancelOutcome(q.now())
		done, others, ran, err := q.st.cancel(ctx, batch, o)
		for id := range done {
			cancelled = append(cancelled, id)
		}
		countByCanceller(counted, ran, o.finishedAt)
		return done, others, err
	}, func(id int64, st Status) error {
		if st == StatusPending || st == StatusInProgress {
			// The statement ends every pending and in_progress job among
			// the ids, so this one had finished then; it was made live
			// again (Retry) before its status was read.
			return fmt.Errorf("%w: job %d had finished and was left unchanged, but it is %s now (retried meanwhile); cancel it again to stop it", ErrJobFinished, id, st)
		}
		return fmt.Errorf("%w: job %d is %s and was left unchanged; only pending and in_progress jobs can be cancelled", ErrJobFinished, id, st)
	})
	if len(cancelled) > 0 {
		q.logger.Info("jobs cancelled", "count", len(cancelled))
		q.cancels.record(cancelled) // before Cancel returns: none of them starts here
		q.runs.cancelled(cancelled) // this queue's running handlers stop at once
		q.notifyCancelled(cancelled)
	}
	q.reportCancelled(counted)
	return res, err
}

// reportCancelled emits EventCancelled for the attempts whose lease had
// passed when this queue's Cancel ended them (cancelCountedByCanceller),
// with counted, their number per type, when there were any.
func (q *Queue) reportCancelled(counted map[string]int64) {
	if len(counted) == 0 {
		return
	}
	var total int64
	out := make([]CancelledCount, 0, len(counted))
	for typ, n := range counted {
		out = append(out, CancelledCount{Type: typ, Count: n})
		total += n
	}
	slices.SortFunc(out, func(a, b CancelledCount) int { return strings.Compare(a.Type, b.Type) })
	q.logger.Info("cancelled attempts whose lease had passed (their workers presumed gone)", "count", total)
	q.emit(Event{Kind: EventCancelled, Count: total, Cancelled: out})
}

// Delete removes the job with the given id, whatever its status but
// in_progress: a running job is refused with an error wrapping
// ErrJobRunning (cancel it first). A missing id gives ErrJobNotFound, and
// an id that is not positive ErrInvalidID (nothing is then written). The
// job's unique key, if it had one, is free again.
func (q *Queue) Delete(ctx context.Context, id int64) error {
	if err := checkIDs("delete", []int64{id}); err != nil {
		return err
	}
	res, err := q.DeleteMany(ctx, []int64{id})
	if err != nil {
		return err
	}
	return res[0].Err
}

// DeleteMany is Delete for many ids, one statement per batch of at most
// 1000 ids, and returns a result per id as CancelMany does (an id that is
// not positive refuses them all, with ErrInvalidID, as there).
func (q *Queue) DeleteMany(ctx context.Context, ids []int64) ([]IDResult, error) {
	if err := checkIDs("delete many", ids); err != nil {
		return nil, err
	}
	var deleted []int64
	res, err := q.control(ctx, ids, func(ctx context.Context, batch []int64) (map[int64]bool, map[int64]Status, error) {
		done, others, err := q.st.deleteJobs(ctx, batch)
		for id := range done {
			deleted = append(deleted, id)
		}
		return done, others, err
	}, func(id int64, st Status) error {
		if st == StatusInProgress {
			return fmt.Errorf("%w: job %d is in_progress and was not deleted; cancel it first (Cancel, or `jobqueue cancel %d`), then delete it", ErrJobRunning, id, id)
		}
		// Deleted between the statement and the read of its status, or
		// changed meanwhile: the job is not there as it was.
		return fmt.Errorf("jobqueue: job %d was not deleted: it changed meanwhile (now %s); try again", id, st)
	})
	if len(deleted) > 0 {
		q.logger.Info("jobs deleted", "count", len(deleted))
		q.tidyKeys(ctx, deleted)
	}
	return res, err
}

// control runs op on ids in batches of at most controlBatch distinct ids,
// in the order given. op returns the ids it changed and the status of the
// others that exist; refused turns the status of an id op left alone into
// its error. The callers have refused ids that are not positive.
func (q *Queue) control(ctx context.Context, ids []int64, op func(context.Context, []int64) (map[int64]bool, map[int64]Status, error), refused func(int64, Status) error) ([]IDResult, error) {
	out := make([]IDResult, 0, len(ids))
	// The result of each id decided so far: an id given again, in this
	// batch or a later one, gets the same result, not the one a second
	// try would give (a job cancelled by the first is finished by then).
	decided := map[int64]error{}
	for start := 0; start < len(ids); {
		// Take ids until the batch holds controlBatch distinct ones.
		seen := map[int64]bool{}
		var batch []int64
		end := start
		for ; end < len(ids); end++ {
			id := ids[end]
			if _, done := decided[id]; done || seen[id] {
				continue
			}
			if len(batch) == controlBatch {
				break
			}
			seen[id] = true
			batch = append(batch, id)
		}
		var done map[int64]bool
		var others map[int64]Status
		if len(batch) > 0 {
			var err error
			done, others, err = op(ctx, batch)
			if err != nil {
				return out, fmt.Errorf("jobqueue: %d job(s) from id %d on: %w", len(batch), batch[0], err)
			}
		}
		for _, id := range ids[start:end] {
			r := IDResult{ID: id}
			err, known := decided[id]
			switch st, ok := others[id]; {
			case known:
				r.Err = err
			case done[id]:
			case ok:
				r.Err = refused(id, st)
			default:
				r.Err = q.jobNotFound(id)
			}
			decided[id] = r.Err
			out = append(out, r)
		}
		start = end
	}
	return out, nil
}

// cancelPayloadPrefix starts the payload of the notification that tells
// workers on PostgreSQL which jobs were cancelled; the ids follow, joined by
// commas. (Other payloads are job types.)
const cancelPayloadPrefix = "jobqueue:cancel:"

// maxNotifyPayload bounds a notification's payload (PostgreSQL's limit is
// 8000 bytes).
const maxNotifyPayload = 7000

// cancelPayloads are the payloads that name ids, each within
// maxNotifyPayload.
func cancelPayloads(ids []int64) []string {
	var out []string
	var b strings.Builder
	for _, id := range ids {
		s := strconv.FormatInt(id, 10)
		if b.Len() > 0 && b.Len()+1+len(s) > maxNotifyPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(cancelPayloadPrefix)
		} else {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// parseCancelPayload returns the ids of a cancel notification, and false
// for any other payload.
func parseCancelPayload(payload string) ([]int64, bool) {
	rest, ok := strings.CutPrefix(payload, cancelPayloadPrefix)
	if !ok {
		return nil, false
	}
	var ids []int64
	for _, f := range strings.Split(rest, ",") {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// notIn is the ids not in done.
func notIn(ids []int64, done map[int64]bool) []int64 {
	var out []int64
	for _, id := range ids {
		if !done[id] {
			out = append(out, id)
		}
	}
	return out
}

// notifyCancelled tells the workers listening on PostgreSQL that jobs were
// cancelled (a no-op elsewhere: workers find out at their next heartbeat).
// A failure is logged: the handlers then stop at their next heartbeat.
func (q *Queue) notifyCancelled(ids []int64) {
	ps, ok := q.st.(pgStore)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), announceTimeout)
	defer cancel()
	if err := ps.notifyCancelled(ctx, ids); err != nil {
		q.logger.Warn("notifying workers of cancelled jobs failed; their handlers stop at their next heartbeat", "err", err)
	}
}
