package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// heartbeatBatch is the most attempts one heartbeat statement renews.
const heartbeatBatch = 500

// Causes set on a handler's context when the heartbeater cancels it.
var (
	// errLostJob: a heartbeat found the attempt no longer holds its job.
	errLostJob = fmt.Errorf("%w: a heartbeat found the attempt no longer holds its job", ErrLeaseLost)
	// errLeaseRanOut: heartbeats failed, and the lease runs out before the
	// next one; another worker may reclaim the job and run it.
	errLeaseRanOut = fmt.Errorf("%w: its lease could not be renewed (heartbeats failed) and runs out before the next heartbeat", ErrLeaseLost)
)

// heartbeater renews, every interval, the leases of the run's in-flight
// attempts (those running or waiting to start, and those whose result's
// write is held back: inflightSet.toRenew), in statements of up to
// heartbeatBatch. It owns no state of its own; it reads the inflightSet,
// moves the leaseEnd of the attempts it renewed, and cancels (with a cause wrapping ErrLeaseLost) the handlers of
// attempts that lost their job or whose lease runs out unrenewed. It writes
// only the lease_until of rows its attempts hold. The PostgreSQL listener
// pokes it (checkNow) when a job running here was cancelled.
type heartbeater struct {
	q        *Queue
	log      *slog.Logger
	lease    time.Duration
	interval time.Duration
	attempts *inflightSet
	// poke asks for a renewal round at once (buffer of one): the listener
	// pokes it when jobs the worker runs were cancelled (Queue.Cancel), so
	// that their handlers stop now rather than at the next tick.
	poke chan struct{}
	// failures follows the runs of failed renewals: a database that cannot
	// be reached is warned of once, not at every heartbeat (renew).
	failures failureStreak
}

// checkNow asks the heartbeater for a renewal round at once, without
// blocking.
func (h *heartbeater) checkNow() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// run renews the leases of every running attempt each interval (and at
// once when poked), and cancels the handlers of attempts that lost their
// job, until ctx ends. It
// also cancels the handler of an attempt whose renewal failed when its
// lease ends before the next heartbeat: past its lease another worker may
// reclaim the job, and the two must not run it at once.
func (h *heartbeater) run(ctx context.Context) {
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-h.poke:
		}
		refs := h.attempts.toRenew(h.due())
		for len(refs) > 0 {
			chunk := refs[:min(len(refs), heartbeatBatch)]
			refs = refs[len(chunk):]
			h.renew(ctx, chunk)
		}
	}
}

// due is the time before which the lease of a settling attempt (its
// result not yet written) must be renewed at this heartbeat
// (inflightSet.toRenew): two intervals ahead, so that one whose lease ends
// later is renewed at a later heartbeat, still at least an interval before
// the end.
func (h *heartbeater) due() time.Time {
	return h.q.now().Add(2 * h.interval)
}

// renew renews the leases of one chunk of attempts and acts on the result.
// A renewal that ran out of time (waiting, most likely, on a row lock that
// another transaction holds: an application's transaction left open on a
// job's row) or whose lock wait the server ended is sent again at once
// leaving locked rows alone (heartbeatSkipLocked), as the completer does
// with completions: one held row kept every attempt of the chunk from
// renewing its lease, and the heartbeater then cancelled all their
// handlers (errLeaseRanOut) and left their jobs to run again. The
// attempts whose rows were locked are renewed at a later heartbeat, or
// cancelled when their leases run out first.
func (h *heartbeater) renew(ctx context.Context, chunk []attemptRef) {
	cctx, cancel := context.WithTimeout(ctx, min(h.interval, dbCallTimeout))
	sent := h.q.now()
	written := sent.Add(h.lease)
	lost, err := h.q.heartbeatTo(cctx, chunk, written)
	timedOut := err != nil && ((errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil) || lockWaitEnded(err))
	cancel()
	var busy []attemptRef
	if timedOut {
		cctx, cancel := context.WithTimeout(ctx, min(h.interval, dbCallTimeout))
		sent = h.q.now()
		written = sent.Add(h.lease)
		lost, busy, err = h.q.heartbeatSkipLockedTo(cctx, chunk, written)
		cancel()
	}
	if err != nil {
		if ctx.Err() == nil {
			if h.failures.failed() {
				h.log.Warn("renewing leases failed; trying again at every heartbeat, and saying so once it works (the failures meanwhile at debug level)", "attempts", len(chunk), "err", err)
			} else {
				h.log.Debug("renewing leases failed again; trying again at the next heartbeat", "attempts", len(chunk), "err", err)
			}
			h.cancelUnrenewed(chunk)
		}
		return
	}
	if n, _ := h.failures.succeeded(); n > 0 {
		h.log.Info("renewing leases again")
	}
	renewed := chunk
	if len(busy) > 0 {
		skipped := make(map[attemptRef]bool, len(busy))
		for _, r := range busy {
			skipped[r] = true
		}
		renewed = make([]attemptRef, 0, len(chunk)-len(busy))
		for _, r := range chunk {
			if !skipped[r] {
				renewed = append(renewed, r)
			}
		}
		h.log.Warn("leases not renewed: another transaction holds their jobs' rows locked; trying again at the next heartbeat", "attempts", len(busy))
		h.cancelUnrenewed(busy)
	}
	// The renewed leases end at sent+lease or a little later (MySQL keeps
	// whole seconds, so take the second before). That is where they end
	// now, even when it is earlier than the end known before: the renewal
	// replaced lease_until, and a wall clock stepped back since the last
	// one (NTP correcting a clock that ran ahead) wrote an earlier end.
	// Kept at the later end, the worker counted on a lease the table no
	// longer gave it, and did not cancel the handler in time when the
	// next renewals failed.
	renewedTo := sent.Add(h.lease).Truncate(time.Second)
	// The lost ones' rows were not written (their tokens no longer
	// match): what a cancel saw of their lease stays the one written
	// before (attempt.leaseWritten).
	var notWritten map[attemptRef]bool
	if len(lost) > 0 {
		notWritten = make(map[attemptRef]bool, len(lost))
		for _, r := range lost {
			notWritten[r] = true
		}
	}
	h.attempts.each(renewed, func(a *attempt) {
		a.leaseEnd = renewedTo
		if !notWritten[a.ref] {
			a.leaseWritten = written
		}
	})
	h.attempts.each(lost, func(a *attempt) {
		if a.settling {
			// Its handler has returned; the write of its result (just
			// written, most likely) is refused and tells it lost.
			return
		}
		h.log.Warn("attempt lost its job (cancelled, or its lease passed and it was reclaimed, retried or deleted); cancelling its handler",
			"job_id", a.ref.ID, "kind", a.row.Name)
		a.cancel(errLostJob)
	})
}

// cancelUnrenewed cancels the handlers of the attempts of refs, whose
// renewal just failed, when their leases end before the next heartbeat.
func (h *heartbeater) cancelUnrenewed(refs []attemptRef) {
	next := h.q.now().Add(h.interval)
	h.attempts.each(refs, func(a *attempt) {
		// A settling one has no handler left to cancel: its result is
		// written fenced by its claim token, refused if the job was
		// reclaimed meanwhile.
		if !a.settling && a.leaseEnd.Before(next) {
			h.log.Error("attempt's lease runs out and could not be renewed; cancelling its handler (the job is left to Reclaim)",
				"job_id", a.ref.ID, "kind", a.row.Name, "lease_end", a.leaseEnd)
			a.cancel(errLeaseRanOut)
		}
	})
}
