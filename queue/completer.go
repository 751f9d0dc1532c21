package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Tuning of the completer.
const (
	// completeBatch is the most attempts one complete statement finishes.
	completeBatch = 500
	// completeLinger is how long the first finished attempt of a batch
	// waits for others before the batch is written; while a batch is being
	// written, the next one gathers.
	completeLinger = 2 * time.Millisecond
	// completeTries is how many times the completer tries to write a
	// result before it gives up on it (the job then stays in_progress
	// until Reclaim runs it again); completeRetryWait is the wait before
	// the second try, multiplied by 4 before each further one. A write
	// that failed because the database could not be reached
	// (connectionLost) is not counted while the worker runs: see
	// outage.
	completeTries     = 4
	completeRetryWait = 50 * time.Millisecond
	// completeOutageWait is the longest wait between two writes of the
	// results kept through an outage (outage).
	completeOutageWait = 5 * time.Second
)

// completeBacklog is how many results not yet written make the completer
// of a worker of concurrency conc full (the claimer then claims no more
// until it catches up): a batch being written (completeBatch) and all the
// attempts the worker holds (conc and those it claims ahead), so that the
// results of one claim that ran while the previous ones are written do not
// hold up the next claim. With completeBatch alone, a worker of
// concurrency 64 (claims of up to 320) was full after every other claim
// (one claim's results written, the next one's run) and its claims waited
// for completions in turn. The backlog stays under twice this.
func completeBacklog(conc int) int {
	return completeBatch + conc + claimAheadCap(conc)
}

// completeGate lets one completion statement of a queue run at a time.
// Each worker has a completer of its own, which has at most one statement
// in flight; several workers of one queue in a process (one per type, say)
// had as many at once, and those waited on each other in the database: the
// new row versions and index entries of completed jobs all go to the same
// end pages of the table and of its indexes (LWLock:BufferContent and
// Lock:extend waits in pg_stat_activity). One at a time, a completer whose
// statement waits gathers the results that arrive meanwhile for its next
// one. A worker alone never waits at the gate. Four workers of concurrency
// 16 on one queue, PostgreSQL, bench with a switch for it, 20 000 jobs, 6
// alternating rounds: 25.8k-28.0k jobs/s against 21.7k-25.8k without the
// gate (one worker of 64: 28.3k-35.0k against 32.8k-36.6k, within the
// noise); BenchmarkDrainClaimers' four workers on one queue drained 1.04 to
// 1.10 times as fast as four on queues of their own with it, 0.99 to 1.06
// without (4 runs each).
//
// The gate only orders statements that take their usual few milliseconds:
// a completer waits at most completeGateWait, and not at all once the
// statement in flight has run that long. A statement stuck on a row lock
// (an application's transaction that holds a job's row, say) held every
// other worker's completions of the queue for as long as it waited, up to
// dbCallTimeout at each of its tries, and their claimers then stopped, their
// completers being full. The zero completeGate is open and ready.
type completeGate struct {
	mu    sync.Mutex
	busy  bool
	since time.Time     // when the statement in flight entered
	freed chan struct{} // closed when it leaves
	// wait overrides completeGateWait when positive (tests).
	wait time.Duration
	// waiting counts the completers waiting to enter (tests read it).
	waiting atomic.Int32
}

// completeGateWait is the longest a completer waits at the gate, and how
// long a statement in flight holds it before the others stop waiting for
// it: about ten times what a completion statement takes on a busy server.
const completeGateWait = time.Second

// enter waits for the completion statement in flight, if any, to end, and
// reports whether it entered the gate (then it must leave). It returns
// false without entering once it has waited completeGateWait, at once
// while the statement in flight has run that long, and as soon as stop is
// closed (the worker stops: its shutdown's writes do not wait for another
// worker's; nil never closes): the caller then writes beside it. Before,
// a stopping worker's completion waited up to completeGateWait here.
func (g *completeGate) enter(stop <-chan struct{}) bool {
	bound := completeGateWait
	if g.wait > 0 {
		bound = g.wait
	}
	deadline := time.Now().Add(bound)
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	for {
		g.mu.Lock()
		if !g.busy {
			g.busy, g.since, g.freed = true, time.Now(), make(chan struct{})
			g.mu.Unlock()
			return true
		}
		now := time.Now()
		wait := min(deadline.Sub(now), g.since.Add(bound).Sub(now))
		freed := g.freed
		g.mu.Unlock()
		if wait <= 0 {
			return false
		}
		timer := time.NewTimer(wait)
		select {
		case <-freed:
			timer.Stop()
		case <-timer.C:
			return false
		case <-stop:
			timer.Stop()
			return false
		}
	}
}

// leave lets the next completion statement run; only a completer that
// entered calls it.
func (g *completeGate) leave() {
	g.mu.Lock()
	g.busy = false
	close(g.freed)
	g.mu.Unlock()
}

// completion is an attempt whose handler succeeded, waiting to be written.
type completion struct {
	a   *attempt
	dur time.Duration
	// tries is how many writes of it have failed.
	tries int
	// skipLocked: a write of it ran out of time (waiting, most likely, on
	// a row lock another transaction holds) or found its row locked, so its
	// writes leave locked rows alone (Queue.completeWith).
	skipLocked bool
	// lostAt are the times (finished_at) of its writes that failed with
	// their connection (connectionLost) and may have been carried out, so
	// a later write that finds its attempt stale checks whether one of
	// them completed the job (Queue.completeLanded).
	lostAt []time.Time
}

// completer writes the succeeded attempts of one run in batches (fenced by
// their claim tokens) and emits their EventCompleted. It owns each result
// from the moment an executor hands it over (add, which never blocks)
// until it is written or given up, and then takes its attempt out of the
// inflightSet (where it stayed, settling, so that the heartbeater renewed
// its lease while the write was held back); it touches nothing else of
// the run.
//
// Its loop (run) never waits on the database itself: a batch is written by
// a goroutine of its own, and a failed batch goes back to the head of the
// pending results to be tried again after a backoff timer, together with
// what arrived meanwhile. So an executor hands over its result at once
// whatever the database does, and memory stays bounded because the claimer
// stops claiming while the backlog is over completeBacklog (full, drained).
type completer struct {
	q   *Queue
	log *slog.Logger
	// dbCtx is the context of its statements: the run's shutdown budget's
	// (run.writesCtx), which ends once the shutdown's time is spent; then
	// what is not written is given up at once (left to Reclaim). Before,
	// a completion that waited on a locked row or a server that did not
	// answer held Run's return up to dbCallTimeout at each of its tries.
	dbCtx context.Context
	// attempts is the run's inflightSet, which holds each result's
	// attempt until it is settled here.
	attempts *inflightSet
	// stopping is closed when the worker stops (its shutdown budget
	// counts): a write no longer waits at the queue's completeGate.
	stopping <-chan struct{}

	backlog int // full over this many unwritten results (completeBacklog)

	mu       sync.Mutex
	incoming []completion // handed over, not yet seen by the loop
	closed   bool         // run returned: results handed over now are dropped
	arrived  chan struct{}
	// unwritten counts the results handed over and not yet written or
	// given up; drained is told (without blocking) whenever it goes down.
	unwritten atomic.Int64
	drained   chan struct{}

	// outage keeps the results whose write failed because the database
	// could not be reached, uncounted, until it can be or the worker
	// stops (see outage); seen by the loop (run) alone. The results are
	// fenced by their claim tokens, so a job reclaimed meanwhile is
	// refused, not completed twice.
	outage outage
}

// newCompleter returns the completer of one run whose attempts are in
// attempts, full over backlog unwritten results, its writes under the
// run's shutdown budget.
func newCompleter(q *Queue, log *slog.Logger, budget *shutdownBudget, attempts *inflightSet, backlog int) *completer {
	return &completer{
		q: q, log: log, dbCtx: budget.context(context.Background()), attempts: attempts, backlog: backlog,
		stopping: budget.stopped(),
		outage:   newOutage(&failureStreak{}, budget),
		arrived:  make(chan struct{}, 1),
		drained:  make(chan struct{}, 1),
	}
}

// add hands over a succeeded attempt. It never blocks. After run has
// returned (only a handler the shutdown abandoned finishes that late) the
// result is dropped and the job left to Reclaim.
func (c *completer) add(done completion) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.attempts.remove(done.a.ref)
		c.log.Warn("job finished after the worker stopped; completion not written, the job is left to Reclaim",
			"job_id", done.a.ref.ID, "kind", done.a.row.Name)
		return
	}
	c.incoming = append(c.incoming, done)
	c.unwritten.Add(1)
	c.mu.Unlock()
	notify(c.arrived)
}

// full reports whether the completer holds more than its backlog of results
// not yet written; the claimer then waits for drained.
func (c *completer) full() bool { return c.unwritten.Load() > int64(c.backlog) }

// take returns the results handed over since the last take.
func (c *completer) take() []completion {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.incoming
	c.incoming = nil
	return got
}

// closeIfIdle closes the completer when nothing was handed over since the
// last take, and reports whether it did.
func (c *completer) closeIfIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.incoming) > 0 {
		return false
	}
	c.closed = true
	return true
}

// settled records that n results were written or given up.
func (c *completer) settled(n int) {
	c.unwritten.Add(-int64(n))
	notify(c.drained)
}

// writeResult is the outcome of writing one batch.
type writeResult struct {
	batch []completion
	at    time.Time // the finished_at the write set
	stale []attemptRef
	// busy are the attempts whose rows another transaction held locked
	// (left alone, to write again); timedOut: the write failed for want of
	// time, or the server ended its wait for a row lock (lockWaitEnded).
	busy     []attemptRef
	err      error
	timedOut bool
}

// run gathers the results handed over: the first of a batch waits up to
// completeLinger for others (or until there are completeBatch), then they
// are written in one statement while the next batch gathers. A batch that
// fails is tried again after a backoff, at the head of what gathered
// meanwhile; the backoff ends when the shutdown's time is spent. When stop
// is closed it writes what has arrived, without lingering, and returns
// once everything is written or given up.
func (c *completer) run(stop <-chan struct{}) {
	var (
		pending  []completion // oldest first; retried results at the head
		writing  bool
		results  = make(chan writeResult, 1)
		lingerC  <-chan time.Time // running while the head of pending lingers
		lingered bool             // the head of pending has waited long enough
		backoffC <-chan time.Time // running while a failed write backs off
		kept     bool             // backoffC is the wait of a write kept through an outage
		stopping bool
		// stopped is closed when the worker stops (its shutdown budget
		// counts): the outage's wait ends then.
		stopped = c.outage.stopped()
		// spent is closed when the shutdown's time is spent (the end of
		// dbCtx): the wait before a counted try ends then, and that try,
		// which cannot run, is given up at once (again). Before, the
		// completer slept out that wait (up to completeRetryWait times 16,
		// 800 ms) first, and Run's return with it, past the shutdown's
		// time.
		spent = c.dbCtx.Done()
	)
	linger := time.NewTimer(completeLinger)
	linger.Stop()
	defer linger.Stop()
	for {
		if !writing && backoffC == nil && len(pending) > 0 && (lingered || stopping || len(pending) >= completeBatch) {
			n := min(len(pending), completeBatch)
			batch := append([]completion(nil), pending[:n]...)
			pending = pending[n:]
			if len(pending) == 0 {
				linger.Stop()
				lingerC, lingered = nil, false
			}
			writing = true
			go func() { results <- c.write(batch) }()
		}
		if stopping && !writing && len(pending) == 0 {
			if c.closeIfIdle() {
				return
			}
			pending = c.take()
			continue
		}
		select {
		case <-c.arrived:
			got := c.take()
			if len(got) > 0 && len(pending) == 0 && lingerC == nil && !lingered {
				linger.Reset(completeLinger)
				lingerC = linger.C
			}
			pending = append(pending, got...)
		case <-lingerC:
			lingerC, lingered = nil, true
		case <-backoffC:
			backoffC, kept = nil, false
		case res := <-results:
			writing = false
			retry, wait, outageWait := c.settle(res)
			if len(retry) > 0 {
				pending = append(retry, pending...)
				lingered = true // they have waited already
				backoffC, kept = time.After(wait), outageWait
			}
		case <-stopped:
			// The worker stops: what the outage keeps is written again
			// now, not after its wait (up to completeOutageWait, which
			// spent StopNow's 5 seconds); from now on its failures count
			// (outage.keeps), and it is given up by the shutdown's rule.
			stopped = nil
			if kept {
				backoffC, kept = nil, false
			}
		case <-spent:
			spent = nil
			backoffC, kept = nil, false
		case <-stop:
			stop, stopping = nil, true
		}
	}
}

// write completes one batch, once. A batch with a result whose write ran
// out of time before leaves locked rows alone, and returns their results as
// busy.
func (c *completer) write(batch []completion) writeResult {
	refs := make([]attemptRef, len(batch))
	skipLocked := false
	var unsure map[attemptRef][]time.Time
	for i, done := range batch {
		refs[i] = done.a.ref
		skipLocked = skipLocked || done.skipLocked
		if len(done.lostAt) > 0 {
			if unsure == nil {
				unsure = make(map[attemptRef][]time.Time)
			}
			unsure[done.a.ref] = done.lostAt
		}
	}
	entered := c.q.completes.enter(c.stopping)
	ctx, cancel := context.WithTimeout(c.dbCtx, cmp.Or(c.q.completeTimeout, dbCallTimeout))
	defer cancel()
	at := c.q.now()
	stale, busy, err := c.q.completeLanded(ctx, refs, at, skipLocked, unsure)
	if entered {
		c.q.completes.leave()
	}
	if h := c.q.afterComplete; h != nil {
		if err = h(err); err != nil {
			stale, busy = nil, nil
		}
	}
	if cause := context.Cause(c.dbCtx); err != nil && cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	if err == nil && len(stale) > 0 {
		c.refused(ctx, batch, stale)
	}
	// Out of time, not stopped: the statement most likely waited on a row
	// lock that another transaction holds; or the server ended its wait.
	timedOut := err != nil && ((errors.Is(ctx.Err(), context.DeadlineExceeded) && c.dbCtx.Err() == nil) || lockWaitEnded(err))
	return writeResult{batch: batch, at: at, stale: stale, busy: busy, err: err, timedOut: timedOut}
}

// refused logs the attempts of batch whose completion was refused (stale)
// and emits their EventLost, on the goroutine of the write (lost may read
// the jobs; the loop never waits on the database).
func (c *completer) refused(ctx context.Context, batch []completion, stale []attemptRef) {
	lost := make(map[attemptRef]bool, len(stale))
	for _, s := range stale {
		lost[s] = true
	}
	for _, done := range batch {
		if row := done.a.row; lost[done.a.ref] {
			c.log.Warn("job finished but its attempt had lost the job (cancelled, or its lease passed and it was reclaimed, retried or deleted); completion refused",
				"job_id", row.ID, "kind", row.Name)
			c.q.lost(ctx, row, c.attempts.written(done.a), nil, done.dur)
		}
	}
}

// settle acts on a written batch: it emits EventCompleted for each attempt
// completed (write has logged and told those refused), and returns the
// results to try again, the busy ones or all when the write failed, how
// long to wait first (giving up on those tried completeTries times), and
// whether they are kept through an outage (kept: that wait ends when the
// worker stops).
func (c *completer) settle(res writeResult) (retry []completion, wait time.Duration, kept bool) {
	if res.err != nil && !res.timedOut && c.outage.keeps(res.err) {
		retry, wait = c.keep(res.batch, res.at, res.err)
		return retry, wait, true
	}
	// A write that could not reach the database once the worker stopped
	// (counted now) did not end the outage.
	if res.err == nil || !connectionLost(res.err) {
		if ended, lasted := c.outage.ended(); ended {
			c.log.Info("completing jobs again: the database can be reached", "outage", lasted.Round(time.Millisecond))
		}
	}
	if res.err != nil {
		retry, wait = c.again(res.batch, res.at, res.err, res.timedOut)
		return retry, wait, false
	}
	done, busy := res.batch, []completion(nil)
	if len(res.busy) > 0 {
		locked := make(map[attemptRef]bool, len(res.busy))
		for _, r := range res.busy {
			locked[r] = true
		}
		done = nil
		for _, d := range res.batch {
			if locked[d.a.ref] {
				busy = append(busy, d)
			} else {
				done = append(done, d)
			}
		}
	}
	if c.q.listening() {
		lost := make(map[attemptRef]bool, len(res.stale))
		for _, s := range res.stale {
			lost[s] = true
		}
		now := c.q.now()
		for _, d := range done {
			if lost[d.a.ref] {
				continue
			}
			ev := *d.a.row
			ev.Status, ev.ClaimToken, ev.LeaseUntil, ev.FinishedAt = StatusCompleted, "", nil, &now
			c.q.emit(Event{Kind: EventCompleted, Job: &ev, Outcome: OutcomeCompleted, Duration: d.dur})
		}
	}
	c.attempts.removeSettled(done)
	c.settled(len(done))
	if len(busy) > 0 {
		retry, wait = c.again(busy, res.at, errRowLocked, true)
		return retry, wait, false
	}
	return nil, 0, false
}

// keep returns batch, whose write failed with err because the database
// could not be reached, to write again after the outage's wait, counting
// no try; the first of an outage is logged as a warning, the others at
// debug level.
func (c *completer) keep(batch []completion, at time.Time, err error) (retry []completion, wait time.Duration) {
	for i := range batch {
		batch[i].lostAt = append(batch[i].lostAt, at)
	}
	first, wait := c.outage.failed()
	if first {
		c.log.Warn("completing jobs failed: the database cannot be reached; the results are kept and written once it can be (their jobs stay in_progress meanwhile)",
			"jobs", len(batch), "err", err)
	} else {
		c.log.Debug("completing jobs failed again: the database cannot be reached", "jobs", len(batch), "err", err, "retry_in", wait)
	}
	return batch, wait
}

// errRowLocked is why a busy result is written again.
var errRowLocked = errors.New("another transaction holds the job's row locked")

// again counts a failed try of each of batch (a write that failed with err,
// or busy results), gives up on those tried completeTries times (their jobs
// stay in_progress until Reclaim runs them again; all of them once the
// shutdown's time is spent), and returns the others, to write again after
// wait; skipLocked marks them to leave locked rows alone from now on.
func (c *completer) again(batch []completion, at time.Time, err error, skipLocked bool) (retry []completion, wait time.Duration) {
	tries := 0
	spent := c.outage.spent() // the shutdown's time: no try would run
	for _, done := range batch {
		done.tries++
		done.skipLocked = done.skipLocked || skipLocked
		if connectionLost(err) {
			done.lostAt = append(done.lostAt, at)
		}
		if done.tries < completeTries && !spent {
			retry = append(retry, done)
			tries = max(tries, done.tries)
		} else {
			c.attempts.remove(done.a.ref)
		}
	}
	if given := len(batch) - len(retry); given > 0 {
		c.log.Error("completing jobs failed; they stay in_progress until Reclaim runs them again", "jobs", given, "err", err)
		c.settled(given)
	}
	if len(retry) == 0 {
		return nil, 0
	}
	wait = completeRetryWait
	for range tries - 1 {
		wait *= 4
	}
	c.log.Warn("completing jobs failed; trying again", "jobs", len(retry), "retry_in", wait, "err", err)
	return retry, wait
}

// notify tells ch without blocking (ch has a buffer of one, so a burst of
// notices becomes one).
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
