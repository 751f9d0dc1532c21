package queue

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jobqueue/jobqueue/internal/jobtext"
)

// Schedule gives the ticks of a periodic job. It must be deterministic
// (the same t gives the same tick in every process), since each tick is
// enqueued once under a key built from its time.
//
// The sub-package queue/cron parses cron expressions, @hourly-style
// shorthands and @every DUR into a Schedule.
type Schedule interface {
	// Next returns the first tick strictly after t, or the zero time
	// when there is none.
	Next(t time.Time) time.Time
}

// PeriodicJob is a job that the leader among a table's workers enqueues at
// each tick of a schedule (see Periodic).
type PeriodicJob struct {
	name     string
	schedule Schedule
	args     JobArgs
	opts     []EnqueueOption
}

// Periodic makes a periodic job named name: at each tick of schedule, the
// leader among the table's workers enqueues args with opts (Type, Policy,
// ExpiresIn…), scheduled at the tick unless opts give At or Delay.
// Register it on a worker with WorkerConfig.Periodic or Worker.AddPeriodic;
// register the same periodic jobs on every worker of the table, since
// whichever worker leads enqueues its own.
//
// Each tick is enqueued exactly once, whatever the number of worker
// processes, their restarts and changes of leader: the leader enqueues it
// with a unique key made of name and the tick's time (UniqueKey), kept for
// twice the interval to the next tick plus a minute (UniqueFor), so that a
// second enqueue of the tick, by a new leader or a retry, is a duplicate;
// and it records the job's last tick in the leader side table, so that
// no tick at or before it is enqueued again once its job is gone
// (enqueueTickOnce).
// Ticks that pass while no worker leads are not made up, except the latest
// one when WorkerConfig.RunMissed is set.
//
// The name is checked when the job is registered: it must be non-empty and
// at most 200 characters, and unique among the worker's periodic jobs.
func Periodic(name string, schedule Schedule, args JobArgs, opts ...EnqueueOption) PeriodicJob {
	return PeriodicJob{name: name, schedule: schedule, args: args, opts: append([]EnqueueOption(nil), opts...)}
}

// Name is the periodic job's name.
func (p PeriodicJob) Name() string { return p.name }

// maxPeriodicName bounds a periodic job's name, so that its ticks' unique
// keys (name and time) fit the unique key's limit.
const maxPeriodicName = jobtext.MaxPeriodicName

// check reports what is wrong with p, as registered on q's worker, at now.
func (p PeriodicJob) check(q *Queue, now time.Time) error {
	switch {
	case p.name == "":
		return errors.New("the name is empty")
	case textProblem(p.name, maxPeriodicName) != "":
		return fmt.Errorf("the name %s", textProblem(p.name, maxPeriodicName))
	case p.schedule == nil:
		return fmt.Errorf("%q: the schedule is nil", p.name)
	case p.args == nil:
		return fmt.Errorf("%q: the args are nil", p.name)
	}
	if next := p.schedule.Next(now); next.IsZero() || !next.After(now) {
		return fmt.Errorf("%q: the schedule gives no tick after %v", p.name, now.Format(time.RFC3339))
	}
	typ, at, expires, policy, _, err := q.resolve(p.opts, now)
	if err == nil {
		_, err = q.prepareJob(p.args, typ, at, expires, policy) // the args encode
	}
	if err != nil {
		return fmt.Errorf("%q: %w", p.name, err)
	}
	return nil
}

// checkPeriodic checks a worker's periodic jobs: each valid, no name twice.
func checkPeriodic(q *Queue, jobs []PeriodicJob) error {
	now := q.now()
	seen := map[string]bool{}
	var problems []error
	for _, p := range jobs {
		if err := p.check(q, now); err != nil {
			problems = append(problems, err)
			continue
		}
		if seen[p.name] {
			problems = append(problems, fmt.Errorf("two periodic jobs are named %q; give each its own name", p.name))
		}
		seen[p.name] = true
	}
	if len(problems) > 0 {
		return fmt.Errorf("jobqueue: invalid periodic job: %w", errors.Join(problems...))
	}
	return nil
}

// tickKey is the unique key of a periodic job's tick: the same in every
// process for the same tick.
func tickKey(name string, tick time.Time) string {
	return "periodic:" + name + "@" + tick.UTC().Format(time.RFC3339Nano)
}

// tickKeyFor is how long a tick's key stays taken: twice the interval to
// the next tick, plus a minute. A new leader enqueues a tick only when it
// is the latest (RunMissed), that is before the next tick, so within that
// time of the tick.
func tickKeyFor(tick, next time.Time) time.Duration {
	if next.IsZero() || !next.After(tick) {
		return 24 * time.Hour
	}
	return 2*next.Sub(tick) + time.Minute
}

// maxCatchUp is the most ticks of one job the leader enqueues back to
// back after it fell behind (a pause, a slow database); beyond that it
// skips to the latest.
const maxCatchUp = 10

// A tick's enqueue that the database fails (a restart, a dropped
// connection, a statement refused) is tried again while the worker leads:
// after periodicRetryWait, the wait doubling up to periodicRetryMaxWait,
// for at most periodicRetryFor from the first try; then the tick is
// skipped. The tick's unique key makes a try that did commit, unknown to
// the leader, a duplicate. The leader used to try three times back to
// back, so that a failure of a few milliseconds lost the tick for good.
const (
	periodicRetryWait    = 50 * time.Millisecond
	periodicRetryMaxWait = 2 * time.Second
	periodicRetryFor     = 30 * time.Second
)

// scheduler enqueues the ticks of a worker's periodic jobs while the
// worker leads. It owns its jobs' next ticks and touches the table only
// through Enqueue (with each tick's unique key).
type scheduler struct {
	q         *Queue
	log       *slog.Logger
	el        *elector
	jobs      []PeriodicJob
	runMissed bool
	// skips follows, per periodic job, the runs of ticks skipped one
	// after the other: the first is logged as an error, the next ones at
	// debug level, and the next tick enqueued says how many there were.
	// Only run's goroutine uses it.
	skips failureStreaks
	// due is, per periodic job, the first tick that this Run has not dealt
	// with (enqueued, found enqueued, or skipped for good) in its last
	// term; nil before it first led. A term that ends with a tick due but
	// not enqueued (the database refused the act at a lapse of the lease,
	// or the leadership ran out by the process's clock) leaves the tick
	// here, and the Run's next term enqueues it when it is at most
	// lapseBound old (resume). Before, the next term started from its own
	// now, and a tick due at a lapse of a term that the same process
	// regained was enqueued by neither term. Only run's goroutine uses it.
	due []time.Time
}

// lapseBound is how old a tick left by this Run's last term may be for
// its next term to make it up: the time a lapse of the leadership lasts
// at most (a lease and a renewal interval), by the queue's clock. A tick
// older than that passed while no worker led, and is made up only as
// RunMissed says.
func (s *scheduler) lapseBound() time.Duration { return s.el.lease + s.el.every }

// skipped logs that the tick of p failed for good and is skipped: an
// error for the first of a run of skipped ticks, then at debug level.
func (s *scheduler) skipped(p PeriodicJob, tick time.Time, err error) {
	streak := s.skips.of(p.name)
	if !streak.failed() {
		s.log.Debug("enqueuing a periodic job's tick failed again; the tick is skipped", "periodic", p.name, "tick", tick, "skipped", streak.count(), "err", err)
		return
	}
	s.log.Error("enqueuing a periodic job's tick failed; the tick is skipped (its next ticks that fail too are logged at debug level, until one is enqueued)",
		"periodic", p.name, "tick", tick, "err", err)
}

// enqueued ends the run of skipped ticks of p, if any, saying how many.
func (s *scheduler) enqueued(p PeriodicJob, tick time.Time) {
	if n, _ := s.skips.of(p.name).succeeded(); n > 0 {
		s.log.Info("periodic job enqueued again after skipped ticks", "periodic", p.name, "tick", tick, "skipped", n)
	}
}

// run waits for the leadership and enqueues ticks while it lasts, until
// ctx ends.
func (s *scheduler) run(ctx context.Context) {
	for {
		changed := s.el.changes()
		f, term, leading := s.el.fence()
		if leading {
			s.lead(ctx, term, f, changed)
		} else {
			select {
			case <-ctx.Done():
			case <-changed:
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// lead enqueues the ticks that come while this worker leads, until the
// leadership changes or ctx ends. Ticks before it began are missed, except
// those that this Run's last term left due within lapseBound (resume) and,
// with runMissed, the latest one of each job. Each enqueue is an act
// fenced by f. Which ticks are due is read on the queue's clock (q.now),
// like every time the queue writes; it waits for the next one with a timer
// of the time left on that clock.
func (s *scheduler) lead(ctx, term context.Context, f *termFence, changed <-chan struct{}) {
	if !s.resume(term, f, s.q.now()) {
		return
	}
	next := s.due
	for {
		var first time.Time
		for _, n := range next {
			if !n.IsZero() && (first.IsZero() || n.Before(first)) {
				first = n
			}
		}
		if first.IsZero() {
			select { // no job has a tick any more
			case <-ctx.Done():
			case <-changed:
			}
			return
		}
		timer := time.NewTimer(first.Sub(s.q.now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-changed:
			timer.Stop()
			return
		case <-timer.C:
		}
		now := s.q.now()
		for i, p := range s.jobs {
			for n := 0; !next[i].IsZero() && !next[i].After(now); n++ {
				if s.el.guard() != nil {
					return // the leadership ran out: the tick stays due
				}
				if n == maxCatchUp {
					last := latestTick(p.schedule, now)
					s.log.Warn("periodic job fell behind; skipping to its latest tick",
						"periodic", p.name, "from", next[i], "to", last)
					next[i] = last
				}
				tick := next[i]
				if !s.enqueue(term, f, p, tick) {
					return // the term ended: the tick stays due for the next one
				}
				next[i] = p.schedule.Next(tick)
			}
		}
	}
}

// resume sets, at the start of a term at now, each job's first tick due
// (s.due): the tick that this Run's last term left due, when it is at most
// lapseBound old, else the first tick after now, enqueuing first the
// latest tick at or before now with runMissed when a tick was missed
// (enqueueTickOnce). It returns false when the term ended meanwhile.
func (s *scheduler) resume(term context.Context, f *termFence, now time.Time) bool {
	if len(s.due) != len(s.jobs) {
		s.due = make([]time.Time, len(s.jobs))
	}
	for i, p := range s.jobs {
		if due := s.due[i]; !due.IsZero() && !due.After(now) && now.Sub(due) <= s.lapseBound() {
			continue // left due by a lapse: enqueued at once, each tick since too
		}
		s.due[i] = time.Time{}
		if s.runMissed {
			if last := latestTick(p.schedule, now); !last.IsZero() {
				if !s.enqueueTick(term, f, p, last, now) {
					s.due[i] = last
					return false
				}
			}
		}
		s.due[i] = p.schedule.Next(now)
	}
	return true
}

// enqueue enqueues one tick of p as an act fenced by f, trying again with
// a growing pause while the database fails it (the tick's unique key makes
// that safe), as long as this worker leads and for at most
// periodicRetryFor. It reports whether it dealt with the tick: enqueued,
// found enqueued, or skipped for good (logged). It returns false when this
// worker's term ended first: the database refused the act (errTermEnded;
// the worker steps down), or the leadership ran out by the process's
// clock; the tick is then left due for the next term (scheduler.due).
func (s *scheduler) enqueue(ctx context.Context, f *termFence, p PeriodicJob, tick time.Time) bool {
	return s.enqueueTick(ctx, f, p, tick, time.Time{})
}

// enqueueTick is enqueue; missedAt, when not zero, says that tick is
// RunMissed's latest tick at missedAt, made up only when a tick was
// missed (enqueueTickOnce).
func (s *scheduler) enqueueTick(ctx context.Context, f *termFence, p PeriodicJob, tick, missedAt time.Time) bool {
	var err error
	first := time.Now()
	wait := periodicRetryWait
	for try := 1; ; try++ {
		if s.el.guard() != nil || ctx.Err() != nil {
			return false
		}
		var id int64
		var dup bool
		// The side table of the unique keys is checked before the act,
		// which holds a connection, and tried again like the act: a check
		// that failed for a moment skipped the tick. The server's clock,
		// which bounds the tick (tickAhead), comes from the act's fence
		// statement, in the act's transaction: no round trip of its own.
		if err = s.q.needUnique(ctx); err == nil {
			cctx, cancel := context.WithTimeout(withFence(ctx, s.el.guard), dbCallTimeout)
			err = s.q.leaderActAt(cctx, f, func(d dbtx, serverNow time.Time) error {
				var err error
				id, dup, err = s.q.enqueueTickOnce(cctx, d, p, tick, serverNow, missedAt)
				return err
			})
			cancel()
		}
		switch {
		case errors.Is(err, errTermEnded):
			s.log.Warn("periodic tick refused by the database: this worker's term has ended there; nothing was enqueued, the worker steps down",
				"periodic", p.name, "tick", tick, "term", f.term, "holder", f.holder)
			s.el.stepDown(f.term)
			return false
		case errors.Is(err, errTickNotMissed):
			s.log.Info("periodic tick not made up: no tick was missed (the schedule changed since the last tick enqueued, whose schedule's next tick has not come)", "periodic", p.name, "tick", tick, "err", err)
			return true
		case err == nil && dup && id == 0:
			s.log.Info("periodic tick already enqueued (no later than the last tick recorded)", "periodic", p.name, "tick", tick)
			s.enqueued(p, tick)
			return true
		case err == nil && dup:
			s.log.Info("periodic tick already enqueued", "periodic", p.name, "tick", tick, "job_id", id)
			s.enqueued(p, tick)
			return true
		case err == nil:
			s.log.Info("periodic job enqueued", "periodic", p.name, "tick", tick, "job_id", id, "term", f.term)
			s.enqueued(p, tick)
			s.q.wake.notify()
			return true
		}
		if errors.Is(err, ErrInvalidJob) || errors.Is(err, ErrPayloadRejected) || errors.Is(err, errTickAhead) || errors.Is(err, ErrSideTableMissing) || time.Since(first)+wait > periodicRetryFor {
			break // no point in trying again, or tried long enough
		}
		if s.el.guard() != nil || ctx.Err() != nil {
			return false
		}
		if try == 1 && s.skips.of(p.name).count() == 0 {
			s.log.Warn("enqueuing a periodic job's tick failed; trying again while this worker leads", "periodic", p.name, "tick", tick, "err", err, "retry_in", wait)
		} else {
			s.log.Debug("enqueuing a periodic job's tick failed again", "periodic", p.name, "tick", tick, "try", try, "err", err, "retry_in", wait)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
		wait = min(2*wait, periodicRetryMaxWait)
	}
	if s.el.guard() != nil {
		return false
	}
	s.skipped(p, tick, err)
	return true
}

// enqueueTickOnce enqueues the job of one tick of p in d, a leader's act,
// unless the tick is no later than the last tick of p recorded in the
// table (dup, id 0), and records it as the last. The tick's unique key
// alone made a second enqueue a duplicate only while the tick's job
// existed: once it was deleted, pruned or deleted on success, which frees
// its key (UniqueFor), a leader that reached the tick again (a new leader
// whose clock is behind the last one's, or RunMissed's latest tick after a
// leader change or a restart) enqueued it a second time. The record (a
// row of the leader side table per periodic job, tickRow) outlives the
// job; the key still makes a tick enqueued by a leader of before the
// record a duplicate.
//
// serverNow, the database server's clock read by the act's fence, bounds
// the tick and the record (periodic_clock.go): a tick more than
// maxTickAhead ahead of it is refused (errTickAhead), and a record that
// far ahead refuses no tick (logged, and replaced by this tick).
//
// missedAt, when not zero, says that tick is RunMissed's latest tick at
// missedAt (a new leader's first look at the job): it is made up only
// when a tick was missed, that is when the next tick recorded with the
// last one (the next tick of the schedule that enqueued it) has come by
// missedAt; else errTickNotMissed, and nothing is written. With the same
// schedule that is always so once tick is later than the last one; with
// a schedule changed since (a deploy), tick may have passed while the
// last leader ran, which had no tick then: made up, it was a job more
// than either schedule gives.
func (q *Queue) enqueueTickOnce(ctx context.Context, d dbtx, p PeriodicJob, tick, serverNow, missedAt time.Time) (id int64, dup bool, err error) {
	if err := tickAhead(p.name, tick, serverNow); err != nil {
		return 0, false, err
	}
	row := tickRow(p.name)
	rec, found, err := q.st.periodicLastTick(ctx, d, row)
	if err != nil {
		return 0, false, fmt.Errorf("jobqueue: reading the last tick of periodic job %q: %w", p.name, err)
	}
	if found && tick.UnixNano() <= rec.tick {
		lastTick := time.Unix(0, rec.tick).UTC()
		if !recordAhead(lastTick, serverNow) {
			return 0, true, nil
		}
		q.logger.Warn("the last tick recorded for a periodic job is ahead of the database server's clock (a leader whose clock was ahead recorded it): it no longer refuses ticks, and this tick replaces it; check the workers' clocks (NTP)",
			"periodic", p.name, "recorded", lastTick, "server_now", serverNow, "tick", tick)
	} else if found && !missedAt.IsZero() && rec.next != 0 && rec.next > missedAt.UnixNano() {
		return 0, false, fmt.Errorf("%w: the last tick enqueued is %s and its schedule's next one %s, after %s",
			errTickNotMissed, time.Unix(0, rec.tick).UTC().Format(time.RFC3339), time.Unix(0, rec.next).UTC().Format(time.RFC3339), missedAt.UTC().Format(time.RFC3339))
	}
	if id, dup, err = q.enqueueTick(ctx, d.tx, p, tick); err != nil {
		return id, dup, err
	}
	if err := q.st.periodicSetLastTick(ctx, d, row, p.name, tickRecord{tick: tick.UnixNano(), next: unixNanos(p.schedule.Next(tick))}); err != nil {
		return 0, false, fmt.Errorf("jobqueue: recording the last tick of periodic job %q: %w", p.name, err)
	}
	return id, dup, nil
}

// errTickNotMissed is the error of RunMissed's latest tick when no tick was
// missed (enqueueTickOnce): it is not made up.
var errTickNotMissed = errors.New("jobqueue: RunMissed's latest tick was not missed")

// unixNanos is t in Unix nanoseconds, or 0 when t is zero or outside the
// years that they hold (1678 to 2262).
func unixNanos(t time.Time) int64 {
	if t.IsZero() || t.Year() < 1678 || t.Year() > 2261 {
		return 0
	}
	return t.UnixNano()
}

// tickRow is the name of the row of the leader side table that records
// the last tick of the periodic job named name: a digest, since the role
// names there are at most 64 characters and periodic names 200.
func tickRow(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "tick:" + hex.EncodeToString(sum[:20])
}

// enqueueTick enqueues the job of one tick of p under the tick's unique
// key, scheduled at the tick unless p's options say otherwise, in tx (a
// leader's act) or on its own when tx is nil, and reports whether the tick
// was already enqueued (dup; id is then that job's).
func (q *Queue) enqueueTick(ctx context.Context, tx *sql.Tx, p PeriodicJob, tick time.Time) (id int64, dup bool, err error) {
	opts := append([]EnqueueOption(nil), p.opts...)
	var o enqueueOpts
	for _, fn := range opts {
		if fn != nil {
			fn(&o)
		}
	}
	if o.at == nil && o.delay == nil {
		opts = append(opts, At(tick))
	}
	opts = append(opts, tickUnique(tickKey(p.name, tick), tickKeyFor(tick, p.schedule.Next(tick)))...)
	return q.enqueueUnique(ctx, tx, p.args, opts...)
}

// tickUnique returns the enqueue options that make a tick's job unique
// under key for hold.
func tickUnique(key string, hold time.Duration) []EnqueueOption {
	return []EnqueueOption{UniqueKey(key), UniqueFor(hold)}
}

// enqueueUnique enqueues args, in tx unless it is nil, and reports whether
// the job was a duplicate of one that holds its unique key (id is then
// that job's).
func (q *Queue) enqueueUnique(ctx context.Context, tx *sql.Tx, args JobArgs, opts ...EnqueueOption) (id int64, dup bool, err error) {
	if tx != nil {
		id, err = q.EnqueueTx(ctx, tx, args, opts...)
	} else {
		id, err = q.Enqueue(ctx, args, opts...)
	}
	var de *DuplicateError
	if errors.As(err, &de) {
		return de.ID, true, nil
	}
	return id, false, err
}

// latestTickHorizon is how far back latestTick looks, at least: a cron
// schedule's date comes back within 8 years (29 February, across 2100).
const latestTickHorizon = 8 * 366 * 24 * time.Hour

// latestTick is the latest tick of s at or before now, or the zero time
// when there is none within latestTickHorizon (or twice the time between
// its next two ticks, when longer). It looks back in windows growing from
// twice that time until one holds a tick, then halves the span between
// that window's start and now until it ends at the latest tick. It used to
// walk the window's ticks, 100 000 at most: a tick of a long run of them
// (every minute of a half year) came out instead of the last; and it gave
// up past about two years, so that RunMissed missed a 29 February or an
// @every 9000h.
func latestTick(s Schedule, now time.Time) time.Time {
	n1 := s.Next(now)
	if n1.IsZero() {
		return time.Time{}
	}
	const maxPeriod = 100 * 366 * 24 * time.Hour // no overflow below
	period := time.Second
	if n2 := s.Next(n1); !n2.IsZero() {
		period = min(max(n2.Sub(n1), time.Second), maxPeriod)
	}
	horizon := max(latestTickHorizon, 2*period)
	// before reports whether s has a tick in (t, now].
	before := func(t time.Time) bool {
		n := s.Next(t)
		return !n.IsZero() && !n.After(now)
	}
	// lo: a tick in (lo, now]; hi: none in (hi, now].
	var lo time.Time
	for window := 2 * period; ; {
		if before(now.Add(-window)) {
			lo = now.Add(-window)
			break
		}
		if window == horizon {
			return time.Time{}
		}
		if window > horizon/4 {
			window = horizon
		} else {
			window *= 4
		}
	}
	hi := now
	for hi.Sub(lo) > time.Nanosecond {
		mid := lo.Add(hi.Sub(lo) / 2)
		if before(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	// The first tick after lo is at or before now, and none is after
	// hi = lo+1ns: it is the latest.
	return s.Next(lo)
}
