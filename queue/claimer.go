package queue

import (
	"context"
	"log/slog"
	"time"
)

// claimGather is how long the claimer waits, while work remains, for every
// slot to be free before it claims for fewer: short next to a claim's round
// trip, long enough for handlers that just finished.
const claimGather = 500 * time.Microsecond

// claimConflictPause is the first pause of the claimer after a claim whose
// every try lost only to other transactions (a deadlock or a Galera
// certification conflict: retryTx); it doubles while they go on, up to
// 100 ms.
const claimConflictPause = 5 * time.Millisecond

// Claiming ahead. While handlers are short next to a claim's round trip,
// the executors finish a batch before the next claim returns and wait idle
// for it: then the claimer holds up to "ahead" claimed jobs beyond
// Concurrency in the work channel, so that the next batch is claimed while
// the current one runs. ahead is the number of jobs the executors are
// expected to finish during one claim round trip (Concurrency × claim
// latency / handler duration, both moving averages), capped by
// claimAheadCap; it is 0 (no buffer, a claim per free slot) while handlers
// take claimAheadMaxHandler or more, and before any handler has returned.
// A buffered attempt is in the inflightSet from its claim on, so the
// heartbeater renews its lease like a running one; it waits about one
// claim round trip before an executor starts it, and an executor does not
// start one whose context was cancelled meanwhile (lease lost, shutdown),
// nor one whose lease or job's deadline has passed meanwhile (it gives it
// back: executors.tooLate); one whose lease could not be renewed is given
// back too, not charged an attempt (executors.notStartedCancelled); both
// through the run's giver, in batches (run.giveBacks).
// A process that crashes leaves its buffered jobs in_progress, and Reclaim
// takes them back once their lease has passed, like any other attempt. At
// shutdown the executors start the buffered attempts during ShutdownTimeout
// like the running ones; those it cuts off are given back without being
// started (Queue.unclaim: pending as before their claim, the attempt not
// counted; a crash, which cannot tell, leaves them to Reclaim, which counts
// it). A worker whose ShutdownTimeout is negative (cancel at once) claims
// nothing ahead: its buffer would be cut off whole at every shutdown.
const (
	// claimAheadMin is the least cap of the buffer (see claimAheadCap). It
	// also sets the size of a busy worker's claims (up to Concurrency plus
	// this) and so of its completer's batches: on PostgreSQL each claim and
	// each completion costs about a millisecond of server CPU whatever its
	// size (planning, commit and WAL flush), so that at 64 a claim's fixed
	// cost was a sixth of the CPU per job; at 256, W=8 and W=64 drain with
	// 30 % and 16 % less CPU per job (client and server). At 900 (was
	// 256) MariaDB drains 10 to 20 % faster still (bench --workers 64,
	// alternating rounds: 11.5k to 12.3k against 10.3k to 12.3k jobs/s),
	// and several processes, whose claims take turns (the claim mutex,
	// store_mysql_claim.go), keep their workers fed while they wait for
	// their turn; PostgreSQL and SQLite drain as before.
	claimAheadMin = 900
	// claimAheadMaxHandler: handlers that take this long on average or
	// longer are not claimed ahead (a claim's round trip is small next to
	// them, and a buffered job would wait for a slot while another worker
	// could run it).
	claimAheadMaxHandler = 20 * time.Millisecond
	// claimAheadMaxBytes bounds the payloads the buffer holds, by their
	// moving average per job: 900 jobs of 1 MB payloads ahead were 900 MB
	// of a worker's memory; at 32 MB they are 32 jobs, which still cover a
	// claim's round trip of handlers that take a millisecond or more.
	claimAheadMaxBytes = 32 << 20
)

// claimAheadCap is the most jobs a worker of concurrency conc holds claimed
// beyond conc: bounded, and sized so that the work channel has room for all.
func claimAheadCap(conc int) int {
	return min(max(conc, claimAheadMin), maxClaim)
}

// claimer is the goroutine of Run: it claims jobs into the run's free slots
// (and, for short handlers, a bounded buffer beyond them: see claimAheadMin)
// and hands them to the executors. It owns the count of claimed jobs whose
// handlers have not returned, the moving averages of claim latency and
// handler duration, the poll timer and the wake-ups; it adds every attempt
// it claims to the inflightSet before handing it out, reads how full the
// completer is (and claims nothing while it is full), and writes nothing
// but claims. While idle it offers its next claim to this process's
// enqueues, and hands out what such a claim took like its own
// (claim_offer.go).
type claimer struct {
	q     *Queue
	cfg   WorkerConfig
	log   *slog.Logger
	dbCtx context.Context // the claims' (under run.writesCtx: they end with the shutdown's budget, or once no handler runs after the stop)
	// giveBacks is the context of the give-backs of its claims that may
	// have committed (claimUnsure): under run.writesCtx too, it ends once
	// the run waits no longer for the claim in flight (claim_late.go).
	giveBacks context.Context
	jobs      context.Context // parent of the handlers' contexts

	attempts  *inflightSet
	completer *completer
	work      chan<- *attempt      // to the executors; room for Concurrency + claimAheadCap
	freed     <-chan time.Duration // from the executors: a handler returned, after this long

	// Moving averages (see ahead); known once measured.
	claimRTT, handlerDur time.Duration
	rttKnown, durKnown   bool
	// payloadLen is the moving average of the claimed jobs' payload
	// lengths in bytes (see claimAheadMaxBytes); 0 before the first.
	payloadLen int

	// cursor holds the watermark and the claim session (made by the
	// first claim; loop closes its session when it returns, or the run
	// once the late claim returned).
	cursor *claimCursor
	// late is the claim that was in flight when stop ended (nil: none):
	// loop returns without waiting for it (claim_late.go).
	late *lateClaim

	// failures follows the runs of failed claims: each is logged once
	// at its start and once at its end (failed, succeeded).
	failures failureStreak
}

// failed logs a claim that failed with err, to be tried again after
// retry: an error for the first of a run of failures, then at debug level
// until a claim works again. A database that cannot be reached for a
// while (a restart, a failover) had an error logged at every try, every
// 5 s at most, for as long as it lasted.
func (c *claimer) failed(err error, retry time.Duration) {
	if !c.failures.failed() {
		c.log.Debug("claiming jobs failed again; trying again", "err", err, "retry_in", retry, "failures", c.failures.count())
		return
	}
	what := "claiming jobs failed; trying again, and saying so once it works (the failures meanwhile at debug level)"
	if connectionLost(err) {
		what = "claiming jobs failed: the database cannot be reached; trying again, and saying so once it works (the failures meanwhile at debug level)"
	}
	c.log.Error(what, "err", err, "retry_in", retry)
}

// succeeded records a claim that worked, and logs the end of a run of
// failures, if one was going on.
func (c *claimer) succeeded() {
	if n, lasted := c.failures.succeeded(); n > 0 {
		c.log.Info("claiming jobs again", "failures", n, "after", lasted.Round(time.Millisecond))
	}
}

// ahead is how many jobs the claimer may hold claimed beyond Concurrency
// now (see claimAheadMin).
func (c *claimer) ahead() int {
	if !c.rttKnown || !c.durKnown || c.handlerDur >= claimAheadMaxHandler || c.cfg.ShutdownTimeout < 0 {
		return 0
	}
	limit := claimAheadCap(c.cfg.Concurrency)
	if c.payloadLen > 0 {
		limit = min(limit, claimAheadMaxBytes/c.payloadLen)
	}
	d := max(c.handlerDur, time.Microsecond)
	want := (int64(c.cfg.Concurrency)*int64(c.claimRTT) + int64(d) - 1) / int64(d)
	return int(min(want, int64(limit)))
}

// handlerReturned folds one handler's duration into its moving average;
// notStarted (an attempt the executor did not start) changes nothing.
func (c *claimer) handlerReturned(d time.Duration) {
	if d == notStarted {
		return
	}
	if !c.durKnown {
		c.handlerDur, c.durKnown = d, true
		return
	}
	c.handlerDur += (d - c.handlerDur) / 8
}

// payloadClaimed folds one claimed job's payload length into its moving
// average, which moves a 64th of the way per job.
func (c *claimer) payloadClaimed(n int) {
	if c.payloadLen == 0 {
		c.payloadLen = max(n, 1)
		return
	}
	c.payloadLen = max(c.payloadLen+(n-c.payloadLen)/64, 1)
}

// claimTook folds one claim's round trip into its moving average.
func (c *claimer) claimTook(d time.Duration) {
	if !c.rttKnown {
		c.claimRTT, c.rttKnown = d, true
		return
	}
	c.claimRTT += (d - c.claimRTT) / 4
}

// loop claims jobs until stop ends or MaxJobs jobs were claimed, and
// returns how many it claimed, and the claim still in flight when stop
// ended (nil: none), whose jobs the run gives back (claim_late.go). It
// keeps held (claimed jobs whose handlers have not returned) within
// Concurrency + ahead. After a full batch it claims again as soon as there
// is room; after a short one (nothing more was due) it waits for the poll
// timer or a wake-up.
func (c *claimer) loop(stop context.Context) (int, *lateClaim) {
	claimed := c.claimUntil(stop)
	if c.cursor != nil && (c.late == nil || c.late.cursor == nil) {
		c.cursor.closeSession() // else the late claim's, once it returned
	}
	return claimed, c.late
}

// claimUntil is loop without the end of the claim session.
func (c *claimer) claimUntil(stop context.Context) int {
	conc := c.cfg.Concurrency
	held := 0
	claimed := 0
	var wakeups <-chan struct{}
	if c.cfg.Waker != nil {
		wakeups = c.cfg.Waker.Wakeups()
	}
	errDelay := time.Duration(0)
	for {
		// Take back the slots freed meanwhile.
	drain:
		for {
			select {
			case d := <-c.freed:
				held--
				c.handlerReturned(d)
			default:
				break drain
			}
		}
		if stop.Err() != nil {
			return claimed
		}
		if c.cfg.MaxJobs > 0 && claimed >= c.cfg.MaxJobs {
			c.log.Info("worker claimed MaxJobs jobs; finishing them", "max_jobs", c.cfg.MaxJobs)
			return claimed
		}
		limit := conc + c.ahead()
		room := limit - held
		if room <= 0 || (held >= conc && room < limit/2) {
			// Every slot is busy, or the buffer ahead of them is still
			// more than half full: wait for a handler to return.
			select {
			case d := <-c.freed:
				held--
				c.handlerReturned(d)
				continue
			case <-stop.Done():
				return claimed
			}
		}
		if c.completer.full() {
			// The completer holds more results than it could write yet
			// (the database is slow or failing): claim no more until it
			// catches up, so that its backlog stays bounded.
			if c.q.onCompleterFull != nil {
				c.q.onCompleterFull()
			}
			select {
			case <-c.completer.drained:
			case d := <-c.freed:
				held--
				c.handlerReturned(d)
			case <-stop.Done():
				return claimed
			}
			continue
		}
		if held > 0 && held < conc {
			// Work remains but some slots are busy and nothing is
			// buffered: give the running handlers a moment to free more,
			// so that one claim fills several slots rather than one claim
			// per slot.
			held = c.gatherSlots(held, stop)
			room = conc + c.ahead() - held
		}
		// One claim takes at most maxClaim jobs: ask for no more, so that a
		// full claim is told from a short one (nothing more due).
		n := min(room, maxClaim)
		if c.cfg.MaxJobs > 0 {
			n = min(n, c.cfg.MaxJobs-claimed)
		}
		// Take the wake channel before claiming, so that an enqueue that
		// lands while the claim runs wakes the idle wait below. A wake-up
		// of the Waker already there is for jobs committed before this
		// claim starts, which it sees: take it now, or it would wake the
		// idle wait for a second claim (on PostgreSQL the NOTIFY of an
		// enqueue of this process arrives along with its local wake-up).
		woken := c.q.wake.wait()
		select {
		case <-wakeups:
		default:
		}
		sent := time.Now()
		mark := c.q.cancels.mark() // before the claim is sent
		res, ok := c.claimOrStop(stop, n)
		if !ok {
			return claimed
		}
		rows, err := res.rows, res.err
		var idle time.Duration
		switch {
		case err != nil && retryableTx(err) && stop.Err() == nil:
			// Every try lost only to other transactions (claims of other
			// nodes of a Galera cluster take the same head rows: SKIP
			// LOCKED sees only local locks). Nothing is wrong: claim
			// again after a short pause that grows while they go on.
			errDelay = min(max(2*errDelay, claimConflictPause), 100*time.Millisecond)
			c.log.Debug("claims lost to concurrent transactions; claiming again", "err", err, "retry_in", errDelay)
			idle, woken = jitter(errDelay), nil
		case err != nil:
			errDelay = min(max(2*errDelay, 100*time.Millisecond), max(c.cfg.PollInterval, 5*time.Second))
			c.failed(err, errDelay)
			idle, woken = errDelay, nil
		case len(rows) < n:
			errDelay = 0
			c.succeeded()
			idle = jitter(c.cfg.PollInterval)
		default:
			errDelay = 0
			c.succeeded()
			c.claimTook(time.Since(sent)) // a full claim: the round trip of a busy queue
		}
		for _, row := range rows {
			c.dispatch(row, mark)
		}
		claimed += len(rows)
		held += len(rows)
		if idle == 0 {
			continue // a full batch: more may be due at once
		}
		// Idle: wait for the poll timer, a wake-up or the end, counting the
		// slots that free up meanwhile. After a claim that found all there
		// was, an enqueue of this process may run the next one meanwhile
		// (claim_offer.go).
		timer := time.NewTimer(idle)
		var offer *claimOffer
		if err == nil {
			offer = c.offer(held, claimed)
		}
	wait:
		for {
			var offered <-chan offerResult
			if offer != nil {
				offered = offer.done
			}
			select {
			case <-stop.Done():
				timer.Stop()
				c.endOfferAtStop(offer)
				return claimed
			case <-timer.C:
				break wait
			case <-woken:
				timer.Stop()
				break wait
			case _, ok := <-wakeups:
				if !ok {
					wakeups = nil
					continue
				}
				timer.Stop()
				break wait
			case d := <-c.freed:
				held--
				c.handlerReturned(d)
			case res := <-offered:
				got := c.offerClaimed(offer, res)
				claimed += got
				held += got
				if got == 0 || got == offer.max {
					// It failed, found nothing past the watermark, or
					// filled the room: claim as usual, at once.
					offer = nil
					timer.Stop()
					break wait
				}
				offer = c.offer(held, claimed) // still idle
			}
		}
		late := c.endOffer(stop, offer)
		claimed += late
		held += late
	}
}

// offer posts the claimer's next claim on the queue's offerBoard for an
// enqueue of this process to run (claim_offer.go), and returns it; nil
// when the queue takes no offers or there is no room.
func (c *claimer) offer(held, claimed int) *claimOffer {
	if !c.q.takesOffers() || c.cursor == nil {
		return nil
	}
	n := min(c.cfg.Concurrency-held, offerMaxJobs) // free slots only
	if c.cfg.MaxJobs > 0 {
		n = min(n, c.cfg.MaxJobs-claimed)
	}
	if n <= 0 {
		return nil
	}
	now := c.q.now()
	after, fromStart := c.cursor.plan(now)
	o := newClaimOffer(c.cfg.Types, n, c.cfg.Lease, after)
	o.planned, o.fromStart = now, fromStart
	o.cancelMark = c.q.cancels.mark() // before an enqueue can take it
	c.q.offers.post(o)
	return o
}

// offerClaimed dispatches the rows of a taken offer, advances the
// watermark past them and returns how many there were.
func (c *claimer) offerClaimed(o *claimOffer, res offerResult) int {
	if res.err != nil {
		c.log.Debug("an enqueue's claim for this worker did not happen; claiming as usual", "err", res.err)
		return 0
	}
	c.cursor.advance(res.rows, o.fromStart, o.planned)
	for _, row := range res.rows {
		c.dispatch(row, o.cancelMark)
	}
	return len(res.rows)
}

// endOffer takes o down (nil: none). An enqueue that took it first is
// waited for, at most dbCallTimeout, and what its claim took dispatched;
// endOffer returns how many jobs that was. Should stop end meanwhile, it
// waits no more (endOfferAtStop).
func (c *claimer) endOffer(stop context.Context, o *claimOffer) int {
	if o == nil || c.q.offers.withdraw(o) {
		return 0
	}
	timer := time.NewTimer(dbCallTimeout)
	defer timer.Stop()
	select {
	case res := <-o.done:
		return c.offerClaimed(o, res)
	case <-stop.Done():
		c.late = &lateClaim{done: o.done}
		return 0
	case <-timer.C:
		c.log.Warn("an enqueue took this worker's next claim and has not told its outcome; what it claimed, if anything, is left to Reclaim once its lease passes")
		return 0
	}
}

// endOfferAtStop takes o down at the claimer's stop (nil: none). An
// enqueue that took it first is not waited for (its claim runs in the
// enqueue's transaction, which a lock may hold up to dbCallTimeout): c.late
// holds it, and the run gives back what it claimed (claim_late.go).
func (c *claimer) endOfferAtStop(o *claimOffer) {
	if o == nil || c.q.offers.withdraw(o) {
		return
	}
	c.late = &lateClaim{done: o.done}
}

// gatherSlots waits up to claimGather for every slot to be free (held, the
// jobs whose handlers have not returned, to reach 0), counting the handlers
// that return, and returns held.
func (c *claimer) gatherSlots(held int, stop context.Context) int {
	timer := time.NewTimer(claimGather)
	defer timer.Stop()
	for held > 0 {
		select {
		case d := <-c.freed:
			held--
			c.handlerReturned(d)
		case <-timer.C:
			return held
		case <-stop.Done():
			return held
		}
	}
	return held
}

// claimOrStop runs one claim of up to n jobs and returns its outcome, or
// false once stop ended first: the claim goes on, and c.late holds it, for
// the run to give back what it claims (claim_late.go). Before, a stop
// waited for the claim in flight, up to dbCallTimeout on a locked table
// (SQLite's write lock held elsewhere, say): the handlers' grace did not
// start, nor did StopNow cancel them, until it returned.
func (c *claimer) claimOrStop(stop context.Context, n int) (offerResult, bool) {
	if stop.Err() != nil {
		return offerResult{}, false // stopped while it gathered slots: no claim
	}
	if c.cursor == nil {
		c.cursor = &claimCursor{q: c.q, types: c.cfg.Types, lease: c.cfg.Lease, giveBacks: c.giveBacks}
	}
	done := make(chan offerResult, 1)
	go func() {
		rows, err := c.claim(n)
		done <- offerResult{rows: rows, err: err}
	}()
	select {
	case res := <-done:
		return res, true
	case <-stop.Done():
		c.late = &lateClaim{done: done, cursor: c.cursor}
		return offerResult{}, false
	}
}

// claim runs one claim of up to n jobs, past the claimer's watermark
// (claim_cursor.go), on c.dbCtx: the worker's stop does not cancel it
// while handlers run (a claim cut off half-way could leave claimed rows
// nobody runs), the end of the shutdown's budget does (see run.writesCtx),
// and so does the end of the handlers after the stop (claim_late.go).
func (c *claimer) claim(n int) ([]*JobRow, error) {
	ctx, cancel := context.WithTimeout(c.dbCtx, dbCallTimeout)
	defer cancel()
	return c.cursor.claim(ctx, n)
}

// dispatch registers a claimed row as in flight and hands it to an executor
// (the channel has room for every slot and the buffer ahead of them, so
// this never blocks). mark is the queue's cancelLog mark taken before the
// claim was sent.
func (c *claimer) dispatch(row *JobRow, mark uint64) {
	ctx, cancel := context.WithCancelCause(c.jobs)
	now := c.q.now()
	a := &attempt{row: row, ref: attemptRef{ID: row.ID, Token: row.ClaimToken}, ctx: ctx, cancel: cancel, cancelMark: mark, claimedAt: now}
	if row.LeaseUntil != nil {
		a.leaseEnd = *row.LeaseUntil
	} else {
		a.leaseEnd = now.Add(c.cfg.Lease)
	}
	a.leaseWritten = a.leaseEnd
	c.attempts.add(a)
	c.payloadClaimed(len(row.Payload))
	if c.log.Enabled(c.jobs, slog.LevelDebug) { // spares boxing the fields of every job
		c.log.Debug("job claimed", "job_id", row.ID, "kind", row.Name, "type", row.Type, "attempt", row.Attempts)
	}
	c.q.emit(Event{Kind: EventClaimed, Job: row})
	c.work <- a
}
