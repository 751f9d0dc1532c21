package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// attemptRef names one attempt: the job and the token of the attempt.
type attemptRef struct {
	ID    int64
	Token string
}

// ref is the attempt of a claimed job.
func (j *JobRow) ref() attemptRef { return attemptRef{ID: j.ID, Token: j.ClaimToken} }

// attemptToken is the claim token of the attempt of job id started by the
// claim batch whose random token is batch: "<batch>-<id>", fresh and unique
// per attempt. This is the one definition of the format. The claim
// statements write it in SQL, where the job's id is known (ClaimJobs,
// ClaimJobsOfType and ClaimJobsOfTypes of PostgreSQL and ClaimJobs of
// SQLite: sqlc.arg(token) || '-' || id; MarkClaimed of MySQL:
// CONCAT(sqlc.arg(token), '-', id)); TestClaimTokenFormat checks on every
// engine and for every type filter that they write exactly
// attemptToken(batch, id). The id in the token is what lets the batched
// statements fence by "id in the ids and token in the tokens" (see
// wellFormed).
func attemptToken(batch string, id int64) string {
	return batch + "-" + strconv.FormatInt(id, 10)
}

// wellFormed reports whether ref's token is an attemptToken of its job.
// Batched statements match "id in the ids and token in the tokens"; with
// well-formed refs and no id twice in a statement (chunkRefs) that is the
// same as matching each (id, token) pair.
func (r attemptRef) wellFormed() bool {
	i := strings.LastIndexByte(r.Token, '-')
	var buf [20]byte // the longest int64
	return i > 0 && r.Token[i+1:] == string(strconv.AppendInt(buf[:0], r.ID, 10))
}

// splitRefs separates refs that can hold a job from those that cannot. When
// every ref is well-formed (the rule), ok is refs itself.
func splitRefs(refs []attemptRef) (ok, bad []attemptRef) {
	all := true
	for _, r := range refs {
		if !r.wellFormed() {
			all = false
			break
		}
	}
	if all {
		return refs, nil
	}
	for _, r := range refs {
		if r.wellFormed() {
			ok = append(ok, r)
		} else {
			bad = append(bad, r)
		}
	}
	return ok, bad
}

// maxClaim bounds one claim's batch.
const maxClaim = 1000

// maxErrorLen bounds the error text stored with a job (bytes; cut at a
// character boundary).
const maxErrorLen = 4000

// newClaimToken is the random token of one claim batch; each job's token is
// attemptToken(batch token, id).
func newClaimToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// claim takes up to max pending, due, unexpired jobs of the given types (every
// type when types is empty), in (scheduled_at, id) order, skipping rows other
// claims hold, and marks them in_progress with attempts+1, a fresh
// claim_token and lease_until = now + lease. It emits no events (the worker
// does).
func (q *Queue) claim(ctx context.Context, types []string, max int, lease time.Duration) ([]*JobRow, error) {
	return q.claimAfter(ctx, q.st, types, max, lease, claimPos{})
}

// claimAfter is claim on st of the jobs after position after in the claim
// order (a claimer's watermark: claim_cursor.go); the rows are in claim
// order. What a claim that may have committed (claimUnsure) took is given
// back on ctx's values without its end (claimAfterOn).
func (q *Queue) claimAfter(ctx context.Context, st claimStore, types []string, max int, lease time.Duration, after claimPos) ([]*JobRow, error) {
	return q.claimAfterOn(ctx, context.WithoutCancel(ctx), st, types, max, lease, after)
}

// claimAfterOn is claimAfter whose give-back of a claim that may have
// committed (claimUnsure) runs on giveBacks, dbCallTimeout at most, and
// before it returns: the claim's own ctx may have ended (the claim was
// cancelled once its commit was sent), and a worker's claims give back on
// the run's context for them, which ends with the shutdown's budget and
// once the run stops waiting for its claim in flight (claim_late.go).
func (q *Queue) claimAfterOn(ctx, giveBacks context.Context, st claimStore, types []string, max int, lease time.Duration, after claimPos) ([]*JobRow, error) {
	if max <= 0 {
		return nil, nil
	}
	if lease <= 0 {
		return nil, fmt.Errorf("jobqueue: claim: the lease must be positive, not %v", lease)
	}
	max = min(max, maxClaim)
	// A claim that lost only to others (a MySQL deadlock, a Galera
	// certification conflict, SQLite busy) claimed nothing: it is run
	// again at once, with a token and a clock of its own (retryTx), and
	// reported only when every try lost.
	var rows []*JobRow
	err := retryTx(ctx, func() error {
		now := q.now()
		var err error
		rows, err = st.claim(ctx, types, max, newClaimToken(), now, now.Add(lease), after)
		if err != nil && retryableTx(err) {
			q.logger.Debug("claim lost to a concurrent transaction; claiming again", "types", types, "err", err)
		}
		return err
	})
	if err != nil {
		var unsure *claimUnsure
		if errors.As(err, &unsure) {
			q.giveBackUnsure(giveBacks, unsure)
		}
		if ctx.Err() != nil {
			q.logger.Debug("claim cancelled", "types", types, "err", err)
		} else if retryableTx(err) {
			q.logger.Debug("claim lost to concurrent transactions at every try", "types", types, "err", err)
		} else {
			// The claimer logs it (claimer.failed), once for a run of
			// failures; an error here too said it twice, at every try.
			q.logger.Debug("claim failed", "types", types, "err", err)
		}
		return nil, fmt.Errorf("jobqueue: claim: %w", err)
	}
	sortClaimed(rows)
	if len(rows) > 0 {
		q.logger.Debug("jobs claimed", "count", len(rows), "types", types)
	}
	return rows, nil
}

// claimUnsure is the error of a claim whose COMMIT failed with its
// connection (connectionLost: the session killed, the server restarted):
// the server may have committed it before the connection broke, so rows,
// the jobs it claimed, may be in_progress with their tokens, claimed by
// nobody. On PostgreSQL the claim is one statement whose answer brings the
// claimed rows: when that answer was lost, the rows are unknown (or some
// of them), and batch is the claim's batch token, by which the store finds
// them (claimBatches: their tokens are attemptToken(batch, id)). A claim
// that the server was still carrying out when its connection broke (cut
// by the network while the statement ran) may commit after the give-back
// looked for its rows: those wait for Reclaim, as every such claim's did.
type claimUnsure struct {
	rows  []*JobRow
	batch string
	err   error
}

// claimBatches is a store whose claims can lose their rows with their
// answer (PostgreSQL): claimedBy returns the attempts that the claim of
// batch started and that still hold their jobs.
type claimBatches interface {
	claimedBy(ctx context.Context, batch string) ([]attemptRef, error)
}

func (e *claimUnsure) Error() string { return e.err.Error() }
func (e *claimUnsure) Unwrap() error { return e.err }

// giveBackUnsure gives back, on ctx (dbCallTimeout at most), the jobs of a
// claim that may have committed (claimUnsure), fenced by their tokens:
// pending as before the claim, the attempt not counted, if it did; nothing
// changes if it did not. They stayed in_progress until their lease had
// passed and Reclaim ran them again. When the database cannot take that
// either, or ctx ends first (a worker that stops: its shutdown's time is
// spent, or it waits for its claim in flight no longer), they are left to
// Reclaim, and the log says so: at debug level when it cannot be reached
// (the claim's own failure says so, once for the outage, and during an
// outage most such claims were never received), as a warning when ctx
// ended, else as an error.
func (q *Queue) giveBackUnsure(ctx context.Context, unsure *claimUnsure) {
	gctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	defer cancel()
	refs, err := q.unsureRefs(gctx, unsure)
	if err == nil && len(refs) > 0 {
		_, err = q.unclaim(gctx, refs)
	}
	if err == nil {
		return
	}
	level := slog.LevelError
	switch {
	case connectionLost(err) && ctx.Err() == nil:
		level = slog.LevelDebug
	case ctx.Err() != nil:
		level = slog.LevelWarn
		if cause := context.Cause(ctx); !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
	}
	q.logger.Log(gctx, level, "a claim failed with its connection and may have committed all the same; giving its jobs back failed too, so they may stay in_progress until Reclaim runs them again",
		"jobs", len(refs), "claim_err", unsure.err, "err", err)
}

// unsureRefs returns the attempts of a claim that may have committed
// (claimUnsure): those of its rows, and, when the store finds a claim's
// attempts by its batch token (claimBatches), those it finds.
func (q *Queue) unsureRefs(ctx context.Context, unsure *claimUnsure) ([]attemptRef, error) {
	refs := make([]attemptRef, len(unsure.rows))
	known := make(map[int64]bool, len(unsure.rows))
	for i, row := range unsure.rows {
		refs[i] = attemptRef{ID: row.ID, Token: row.ClaimToken}
		known[row.ID] = true
	}
	b, ok := q.st.(claimBatches)
	if !ok || unsure.batch == "" {
		return refs, nil
	}
	found, err := b.claimedBy(ctx, unsure.batch)
	if err != nil {
		return refs, fmt.Errorf("finding the jobs of the claim: %w", err)
	}
	for _, r := range found {
		if !known[r.ID] {
			refs = append(refs, r)
		}
	}
	return refs, nil
}

// sortClaimed puts claimed rows in claim order, (scheduled_at, id): an
// UPDATE returns them in no particular order.
func sortClaimed(rows []*JobRow) {
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].ScheduledAt.Equal(rows[j].ScheduledAt) {
			return rows[i].ScheduledAt.Before(rows[j].ScheduledAt)
		}
		return rows[i].ID < rows[j].ID
	})
}

// writeHeld runs write, a fenced write that reports the ids whose attempts
// still held their jobs, on refs a chunk at a time (chunkRefs). It returns
// the refs that held no job: the malformed ones (splitRefs), never sent,
// and those write did not report; on an error, those found so far.
func writeHeld(refs []attemptRef, write func(chunk []attemptRef) (map[int64]bool, error)) (notHeld []attemptRef, err error) {
	refs, notHeld = splitRefs(refs)
	for _, chunk := range chunkRefs(refs) {
		held, err := write(chunk)
		if err != nil {
			return notHeld, err
		}
		for _, r := range chunk {
			if !held[r.ID] {
				notHeld = append(notHeld, r)
			}
		}
	}
	return notHeld, nil
}

// heartbeat extends the leases of running attempts to now + lease; it
// returns the refs that no longer hold their job (lease lost).
func (q *Queue) heartbeat(ctx context.Context, refs []attemptRef, lease time.Duration) (lost []attemptRef, err error) {
	if lease <= 0 {
		return nil, fmt.Errorf("jobqueue: heartbeat: the lease must be positive, not %v", lease)
	}
	return q.heartbeatTo(ctx, refs, q.now().Add(lease))
}

// heartbeatTo is heartbeat writing lease_until = leaseUntil (the
// heartbeater keeps what it wrote: attempt.leaseWritten).
func (q *Queue) heartbeatTo(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (lost []attemptRef, err error) {
	lost, err = writeHeld(refs, func(chunk []attemptRef) (map[int64]bool, error) {
		return q.st.extend(ctx, chunk, leaseUntil)
	})
	if err != nil {
		return lost, fmt.Errorf("jobqueue: heartbeat: %w", err)
	}
	if len(lost) > 0 {
		// Not a warning: an attempt that finished while the statement ran
		// (its completion written) is among them too. The heartbeater warns
		// for each one still running, whose handler it cancels.
		q.logger.Debug("leases not renewed: the attempts no longer hold their jobs", "count", len(lost))
	}
	return lost, nil
}

// heartbeatSkipLocked is heartbeat that leaves alone, rather than waits
// for, the rows another transaction holds locked (store.extendSkipLocked):
// it returns the refs that no longer hold their job (lost) apart from
// those whose rows were locked (busy: they still hold their jobs, but their
// leases were not renewed). The read that tells them apart waits for no
// row lock; when it fails, the refs not renewed count as busy.
func (q *Queue) heartbeatSkipLocked(ctx context.Context, refs []attemptRef, lease time.Duration) (lost, busy []attemptRef, err error) {
	if lease <= 0 {
		return nil, nil, fmt.Errorf("jobqueue: heartbeat: the lease must be positive, not %v", lease)
	}
	return q.heartbeatSkipLockedTo(ctx, refs, q.now().Add(lease))
}

// heartbeatSkipLockedTo is heartbeatSkipLocked writing lease_until =
// leaseUntil.
func (q *Queue) heartbeatSkipLockedTo(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (lost, busy []attemptRef, err error) {
	notRenewed, err := writeHeld(refs, func(chunk []attemptRef) (map[int64]bool, error) {
		return q.st.extendSkipLocked(ctx, chunk, leaseUntil)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("jobqueue: heartbeat: %w", err)
	}
	if len(notRenewed) == 0 {
		return nil, nil, nil
	}
	if lost, busy, rerr := q.stillHeld(ctx, notRenewed); rerr == nil {
		return lost, busy, nil
	}
	return nil, notRenewed, nil
}

// complete finishes attempts as completed (or deletes the rows when the queue
// deletes on success), fenced by token; it returns the refs that no longer
// held their job (stale; nothing changed for them).
func (q *Queue) complete(ctx context.Context, refs []attemptRef) (stale []attemptRef, err error) {
	stale, _, err = q.completeWith(ctx, refs, false)
	return stale, err
}

// completeWith is complete; with skipLocked the jobs whose rows another
// transaction holds locked are left alone where the engine can (see the
// stores' complete) and returned apart as busy: their attempts still hold
// them, to be completed later.
func (q *Queue) completeWith(ctx context.Context, refs []attemptRef, skipLocked bool) (stale, busy []attemptRef, err error) {
	return q.completeLanded(ctx, refs, q.now(), skipLocked, nil)
}

// completeLanded is completeWith for refs some of which an earlier write
// may have completed already: one whose answer was lost with its
// connection (connectionLost). It writes now as the jobs' finished_at.
// unsure holds those refs, each with the finished_at of its writes whose
// answers were lost. A ref of unsure that this write finds stale is not:
// its job completed by one of those writes (the job completed with that
// very finished_at, so no other attempt completed it; or gone, for a queue
// that deletes on success). Taken for stale, it was warned of as
// "completion refused" and counted lost.
func (q *Queue) completeLanded(ctx context.Context, refs []attemptRef, now time.Time, skipLocked bool, unsure map[attemptRef][]time.Time) (stale, busy []attemptRef, err error) {
	stale, err = writeHeld(refs, func(chunk []attemptRef) (map[int64]bool, error) {
		return q.st.complete(ctx, chunk, now, q.deleteOnSuccess, skipLocked)
	})
	if err == nil && skipLocked && len(stale) > 0 {
		// The others are written: a failed read leaves these to try again
		// (those that were stale show it then), rather than the batch.
		if s, held, rerr := q.stillHeld(ctx, stale); rerr == nil {
			stale, busy = s, held
		} else {
			stale, busy = nil, stale
		}
	}
	if err != nil {
		return stale, nil, fmt.Errorf("jobqueue: complete: %w", err)
	}
	if len(unsure) > 0 && len(stale) > 0 {
		stale = q.notLanded(ctx, stale, unsure)
	}
	if len(stale) > 0 {
		q.logger.Warn("stale attempts not completed", "count", len(stale))
	}
	return stale, busy, nil
}

// notLanded returns the refs of stale but those of unsure whose earlier
// write completed their jobs (see completeLanded). A job that cannot be
// read stays stale.
func (q *Queue) notLanded(ctx context.Context, stale []attemptRef, unsure map[attemptRef][]time.Time) []attemptRef {
	out := stale[:0:0]
	for _, r := range stale {
		lostAt, ok := unsure[r]
		if !ok {
			out = append(out, r)
			continue
		}
		job, err := q.Get(ctx, r.ID)
		switch {
		case err == nil && job.Status == StatusCompleted && finishedBy(job.FinishedAt, lostAt):
		case errors.Is(err, ErrJobNotFound) && q.deleteOnSuccess:
		default:
			if err != nil && !errors.Is(err, ErrJobNotFound) {
				q.logger.Debug("reading a job whose completion's answer was lost failed; taking the attempt as stale", "job_id", r.ID, "err", err)
			}
			out = append(out, r)
			continue
		}
		q.logger.Debug("completion refused, but an earlier write of it whose answer was lost had completed the job", "job_id", r.ID)
	}
	return out
}

// finishedBy reports whether finished, a completed job's finished_at, is
// one of writes, the finished_at of writes of one attempt's completion
// whose answers were lost: then one of them completed the job. Another
// attempt of the job (its claim lost with a failed-over primary, or given
// back, so its attempts count is the same) completed it at another time.
// It is the rule of a failure's lost writes too (failWritten), for the
// finished_at of a failed or expired job and the scheduled_at of a retried
// one. The column keeps microseconds (PostgreSQL, SQLite) or whole seconds
// (MySQL's DATETIME), rounded or truncated by the engine: on MySQL another
// attempt that ended the job within the same second is not told apart.
func finishedBy(finished *time.Time, writes []time.Time) bool {
	if finished == nil {
		return false
	}
	for _, at := range writes {
		for _, unit := range []time.Duration{time.Microsecond, time.Second} {
			if finished.Equal(at.Round(unit)) || finished.Equal(at.Truncate(unit)) {
				return true
			}
		}
	}
	return false
}

// stillHeld reads the jobs of refs and separates the refs that no longer
// hold their job (stale) from those that still do (held). The read waits
// for no row lock.
func (q *Queue) stillHeld(ctx context.Context, refs []attemptRef) (stale, held []attemptRef, err error) {
	refs, stale = splitRefs(refs)
	ids := make(map[int64]bool, len(refs))
	for _, chunk := range chunkRefs(refs) {
		jobs, err := q.st.heldAttempts(ctx, chunk)
		if err != nil {
			return nil, nil, err
		}
		for _, j := range jobs {
			ids[j.ID] = true
		}
	}
	for _, r := range refs {
		if ids[r.ID] {
			held = append(held, r)
		} else {
			stale = append(stale, r)
		}
	}
	return stale, held, nil
}

// release ends attempts the worker gives up (at shutdown, when their
// handlers did not finish in time) at once, by the outcome rule
// (decideOutcome with causeReleased): deadline passed → expired; attempts
// used up → failed; else pending again now. It reads the jobs the attempts
// still hold, then writes each group of equal ends in one statement fenced
// by token, like complete; it returns the refs that no longer held their
// job (nothing changed for them).
func (q *Queue) release(ctx context.Context, refs []attemptRef) (stale []attemptRef, err error) {
	stale, _, err = q.releaseEnds(ctx, refs)
	return stale, err
}

// releaseEnds is release, also returning the end written for each
// attempt it released.
func (q *Queue) releaseEnds(ctx context.Context, refs []attemptRef) (stale []attemptRef, ends map[attemptRef]attemptEnd, err error) {
	now := q.now()
	refs, stale = splitRefs(refs)
	ends = map[attemptRef]attemptEnd{}
	for _, chunk := range chunkRefs(refs) {
		jobs, err := q.st.heldAttempts(ctx, chunk)
		if err != nil {
			return stale, ends, fmt.Errorf("jobqueue: release: %w", err)
		}
		order, groups := groupEnds(jobs, endCause{kind: causeReleased}, now)
		for _, e := range order {
			held, err := q.st.endAttempts(ctx, groups[e], e)
			if err != nil {
				return stale, ends, fmt.Errorf("jobqueue: release: %w", err)
			}
			for _, r := range groups[e] {
				if held[r.ID] {
					ends[r] = e
				}
			}
		}
		for _, r := range chunk {
			if _, ok := ends[r]; !ok {
				stale = append(stale, r)
			}
		}
	}
	if n := len(ends); n > 0 {
		q.logger.Warn("interrupted attempts released", "count", n)
		q.wake.notify()
	}
	return stale, ends, nil
}

// unclaim gives back attempts that were claimed but never started (their
// handlers never ran: the shutdown cut them off while they waited in the
// claimer's buffer): each job still held is pending again as it was before
// its claim, its attempt not counted, its scheduled_at and error kept,
// fenced by token like release. It returns the refs that no longer held
// their job (nothing changed for them). A job whose deadline has passed
// meanwhile is pending with a passed deadline, which no claim takes and
// ExpireOverdue expires.
func (q *Queue) unclaim(ctx context.Context, refs []attemptRef) (stale []attemptRef, err error) {
	stale, err = writeHeld(refs, func(chunk []attemptRef) (map[int64]bool, error) {
		return q.st.unclaim(ctx, chunk)
	})
	if err != nil {
		return stale, fmt.Errorf("jobqueue: giving back unstarted attempts: %w", err)
	}
	if n := len(refs) - len(stale); n > 0 {
		q.logger.Info("claimed jobs not started given back", "count", n)
		q.wake.notify()
	}
	return stale, nil
}

// emitGivenBack emits the EventFailed of an attempt of row (as claimed)
// that unclaim gave back, with err as the reason: its job pending as
// before the claim, the event marked GivenBack.
func (q *Queue) emitGivenBack(row *JobRow, err error) {
	if !q.listening() {
		return
	}
	ev := *row
	ev.Status, ev.Attempts, ev.ClaimToken, ev.LeaseUntil = StatusPending, row.Attempts-1, "", nil
	q.emit(Event{Kind: EventFailed, Job: &ev, Err: err, Outcome: OutcomeRetried, GivenBack: true})
}

// fail records a failed attempt of job (fenced by job.ID and job.ClaimToken)
// with the handler's error, as the outcome rule decides (decideOutcome). It
// returns the new status and, for pending, the next scheduled_at; an error
// wrapping ErrLeaseLost when the attempt was stale (nothing changed).
func (q *Queue) fail(ctx context.Context, job *JobRow, handlerErr error) (Status, time.Time, error) {
	e, err := q.failAttempt(ctx, job, handlerErr)
	if err != nil {
		return "", time.Time{}, err
	}
	return e.status, e.retryAt, nil
}

// failAttempt is fail returning the whole end it decided (with its
// outcome): written when the error is nil; else the end it tried to write,
// which a write whose answer was lost with its connection may have written
// all the same (failLanded).
func (q *Queue) failAttempt(ctx context.Context, job *JobRow, handlerErr error) (attemptEnd, error) {
	e := decideOutcome(job, handlerFailed(handlerErr), q.now())
	// The write is one fenced statement, a transaction of its own: when it
	// lost a deadlock (MySQL: with a claim, which locks index entries before
	// rows) or found SQLite busy, nothing changed and it runs again.
	var ok bool
	err := retryTx(ctx, func() error {
		var err error
		ok, err = q.st.fail(ctx, job.ref(), e)
		return err
	})
	if err != nil {
		return e, fmt.Errorf("jobqueue: recording the failure of job %d: %w", job.ID, err)
	}
	if !ok {
		return e, fmt.Errorf("%w: job %d is no longer held by this attempt; its failure was not recorded", ErrLeaseLost, job.ID)
	}
	// The worker logs the outcome for users (with the handler's duration);
	// this line is for tracing the queue itself.
	q.logger.Debug("failed attempt recorded", "job_id", job.ID, "kind", job.Name, "attempt", job.Attempts, "outcome", e.outcome)
	return e, nil
}

// failLanded reports whether one of lost, the ends that writes of the
// failure of job's attempt (job as claimed) tried to write and whose
// answers were lost with their connection (connectionLost), recorded it,
// and returns that end. A write of it again, refused, was taken for an
// attempt that had lost its job. The job must be as that write left it
// (failWritten), down to the time it set, by the rule of completions
// (finishedBy): another attempt of the job with the same attempts count
// (its claim lost with a failed-over primary) that failed it with the same
// error ended it at another time, and was taken for this one. A job that
// cannot be read is not taken as recorded.
func (q *Queue) failLanded(ctx context.Context, job *JobRow, lost []attemptEnd) (attemptEnd, bool) {
	now, err := q.Get(ctx, job.ID)
	if err != nil {
		q.logger.Debug("reading a job whose failure's answer was lost failed; taking the attempt as lost", "job_id", job.ID, "err", err)
		return attemptEnd{}, false
	}
	for _, e := range lost {
		if failWritten(now, job.Attempts, e) {
			return e, true
		}
	}
	return attemptEnd{}, false
}

// failWritten reports whether row, a job as read, is as the write of end e
// of its attempt number attempts left it: e's status and error text, its
// claim token cleared, its attempts unchanged since the claim (so neither
// Reclaim nor a later attempt ended it) and the time that write set,
// finished_at (failed, expired) or scheduled_at (retried), as the engine
// stores it (finishedBy).
func failWritten(row *JobRow, attempts int, e attemptEnd) bool {
	if row.Status != e.status || row.Attempts != attempts || row.ClaimToken != "" || row.Error != e.errText {
		return false
	}
	if e.status == StatusPending {
		return finishedBy(&row.ScheduledAt, []time.Time{e.retryAt})
	}
	return finishedBy(row.FinishedAt, []time.Time{e.finishedAt})
}

// errorText is the error's text as stored: never empty, valid UTF-8 without
// NUL, and at most maxErrorLen bytes. It never panics: a handler may
// return a nil pointer as a non-nil error (whose Error method then reads
// through nil), or an error whose Error method panics, and the text is
// read on an executor's goroutine, where a panic would end the process.
func errorText(err error) string {
	s := "failed"
	switch v := reflect.ValueOf(err); {
	case err == nil:
	case v.Kind() == reflect.Pointer && v.IsNil():
		s = fmt.Sprintf("failed: the handler returned a nil %T as its error", err)
	default:
		// fmt recovers a panicking Error method into its text.
		if t := fmt.Sprint(err); t != "" {
			s = t
		}
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) > maxErrorLen {
		cut := maxErrorLen - len("…")
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
