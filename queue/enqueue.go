package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Enqueue adds one job and returns its id. It is pending at once (or at
// the time of At/Delay), of type "default" unless Type says otherwise, with
// the queue's retry policy unless Policy says otherwise. Bad input returns
// an error wrapping ErrInvalidJob, ErrPayloadRejected or ErrInvalidPolicy
// and writes nothing. On PostgreSQL the calls of many goroutines at once
// share statements (enqueue_combine.go), each still with its own id or
// error.
func (q *Queue) Enqueue(ctx context.Context, args JobArgs, opts ...EnqueueOption) (int64, error) {
	return q.enqueue(ctx, nil, args, opts)
}

// EnqueueTx adds one job inside the caller's transaction: the job exists
// only if tx commits. tx may come from any *sql.DB on the same database.
// On PostgreSQL the commit wakes idle workers everywhere (the insert
// NOTIFYs, see WorkerConfig.PollOnly). On MySQL, whose queue cannot see
// the caller's commit, idle workers everywhere (this process's too) are
// woken 5, 50 and 500 ms after the call, so that a transaction that
// commits within half a second has its job started at the next of those
// moments. On SQLite idle workers everywhere see the commit itself (see
// WorkerConfig.PollOnly). The job is not visible when EnqueueTx returns.
func (q *Queue) EnqueueTx(ctx context.Context, tx *sql.Tx, args JobArgs, opts ...EnqueueOption) (int64, error) {
	if tx == nil {
		return 0, errors.New("jobqueue: EnqueueTx: the transaction is nil; use Enqueue")
	}
	return q.enqueue(ctx, tx, args, opts)
}

func (q *Queue) enqueue(ctx context.Context, tx *sql.Tx, args JobArgs, opts []EnqueueOption) (int64, error) {
	now := q.now()
	args, opts = unwrapOptions(args, opts)
	typ, at, expires, p, key, err := q.resolve(opts, now)
	if err != nil {
		return 0, err
	}
	j, err := q.prepareJob(args, typ, at, expires, p)
	if err != nil {
		return 0, err
	}
	if q.enqueueMW == nil {
		return q.writeOne(ctx, tx, j, key, now)
	}
	call := &EnqueueCall{Jobs: []EnqueuedJob{j.view()}, Tx: tx, one: j, key: key, tx: tx, now: now}
	err = q.enqueueMW(ctx, call)
	return call.id, err
}

// writeOne writes one checked job, in tx or on its own, and returns its id
// (for a duplicate of a unique key, the existing job's id with an error
// wrapping ErrDuplicate).
func (q *Queue) writeOne(ctx context.Context, tx *sql.Tx, j *newJob, key *uniqueKey, now time.Time) (int64, error) {
	var id int64
	var err error
	inline := false // the insert notified (PostgreSQL)
	woke := false   // this process's workers were woken (the early commit)
	if key != nil {
		id, err = q.enqueueKeyed(ctx, tx, j, key, now)
		if errors.Is(err, ErrDuplicate) || errors.Is(err, ErrSideTableMissing) {
			return id, err
		}
	} else if tx != nil {
		id, err = q.st.insert(ctx, q.run.onCallers(tx), j, now)
	} else {
		alone := func() (int64, error) {
			d := q.run.on(nil)
			if q.notifier != nil {
				d.notify = q.notifier.inline()
				if d.notify {
					d.visible = func(claimed bool) {
						woke = true
						if !claimed {
							q.wake.notify()
						}
					}
					d.offers = &q.offers
				}
			}
			inline = d.notify
			return q.st.insert(ctx, d, j, now)
		}
		if q.combiner == nil || fencedContext(ctx) {
			id, err = alone()
		} else {
			id, err = q.combiner.enqueue(ctx, j, alone)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("jobqueue: enqueue %s: %w", j.name, refusedPayload(err))
	}
	if tx == nil {
		if !woke {
			q.wake.notify() // this process's workers
		}
		if !inline {
			q.notifyEnqueued(j.typ) // wake workers everywhere
		}
		q.countEnqueued(ctx, 1)
	} else {
		q.notifyCallersCommit() // MySQL: wake workers everywhere, after the commit
	}
	q.logger.Debug("job enqueued", "id", id, "kind", j.name, "type", j.typ, "scheduled_at", j.scheduledAt)
	return id, nil
}

// WithOptions gives one job of EnqueueMany (or EnqueueManyTx) options of
// its own, applied after the call's: a unique key per job, say
// (queue.WithOptions(args, queue.UniqueKey("report:42"))). A job's own
// option replaces the call's of the same kind; its schedule (At or Delay)
// replaces the call's schedule, and its deadline (ExpiresAt or ExpiresIn)
// the call's deadline, whichever of the two each gives. With Enqueue it
// adds to the call's options likewise. WithOptions of a job that has
// options of its own adds opts after them.
func WithOptions(args JobArgs, opts ...EnqueueOption) JobArgs {
	if w, ok := args.(withOptions); ok {
		// One wrapper: a wrapper inside another would go to the codec as
		// the args (the payload {}), its options lost.
		return withOptions{args: w.args, opts: append(w.opts[:len(w.opts):len(w.opts)], opts...)}
	}
	return withOptions{args: args, opts: opts}
}

// withOptions is a job with options of its own (WithOptions).
type withOptions struct {
	args JobArgs
	opts []EnqueueOption
}

// Kind is the kind of the job's args.
func (w withOptions) Kind() string {
	if w.args == nil {
		return ""
	}
	return w.args.Kind()
}

// unwrapOptions returns the args inside a WithOptions and the options of
// the call followed by the job's.
func unwrapOptions(args JobArgs, opts []EnqueueOption) (JobArgs, []EnqueueOption) {
	w, ok := args.(withOptions)
	if !ok {
		return args, opts
	}
	return w.args, withOwn(opts, w.opts)
}

// withOwn is the options of a job with options of its own (WithOptions):
// the call's, then the job's, which replace the call's (ownOptions).
func withOwn(call, own []EnqueueOption) []EnqueueOption {
	all := make([]EnqueueOption, 0, len(call)+1+len(own))
	return append(append(append(all, call...), ownOptions), own...)
}

// EnqueueMany adds jobs in multi-row statements (chunks within the
// engine's limits; on PostgreSQL, unless behind a transaction pooler, one
// COPY), all or nothing: one bad job, or a failed statement, and none is
// written; the error names the index of a bad job. The options
// apply to every job (give a job options of its own with WithOptions). It
// returns how many jobs were written: a job whose UniqueKey a live job
// holds (one written earlier in the same call included) is skipped as a
// duplicate, not counted, and is no error. EnqueueManyResults tells which
// jobs those were, and the ids of the jobs holding their keys.
func (q *Queue) EnqueueMany(ctx context.Context, args []JobArgs, opts ...EnqueueOption) (int, error) {
	n, _, err := q.enqueueMany(ctx, nil, args, opts)
	if err == nil && n > 0 {
		q.wake.notify()
	}
	return n, err
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction; workers
// learn of its jobs as of EnqueueTx's.
func (q *Queue) EnqueueManyTx(ctx context.Context, tx *sql.Tx, args []JobArgs, opts ...EnqueueOption) (int, error) {
	if tx == nil {
		return 0, errors.New("jobqueue: EnqueueManyTx: the transaction is nil; use EnqueueMany")
	}
	n, _, err := q.enqueueMany(ctx, tx, args, opts)
	return n, err
}

// EnqueueResult is what EnqueueManyResults tells of one job of the call.
type EnqueueResult struct {
	// ID is, for a job with a UniqueKey, the id of the job that holds its
	// key: the job itself when it was written, else the live job that
	// held the key already (an earlier job of the same call included).
	// It is 0 for a job without a key: those are written, but their ids
	// are not read back, because the bulk path writes them in multi-row
	// statements (on PostgreSQL, in a call with no keyed job, one COPY),
	// which return none; reading them would slow every bulk enqueue. Enqueue a
	// job on its own to learn its id.
	ID int64
	// Duplicate is set when the job's unique key was held by the live job
	// ID, so that nothing was written for it.
	Duplicate bool
}

// EnqueueManyResults is EnqueueMany that tells what became of each job: a
// result per job, in the order given, with, for every job that carried a
// UniqueKey, whether it was written or was a duplicate and the id of the
// job that holds its key (see EnqueueResult; jobs without a key are all
// written, with ID 0). The keys are taken under the database's unique
// constraint, so under any number of concurrent enqueuers of the same
// keys exactly one call writes each key and every other is told it was a
// duplicate of that job. Jobs without a key are written as by EnqueueMany,
// by the same path at the same speed. On an error nothing was written and
// the results are nil.
func (q *Queue) EnqueueManyResults(ctx context.Context, args []JobArgs, opts ...EnqueueOption) ([]EnqueueResult, error) {
	n, keyed, err := q.enqueueMany(ctx, nil, args, opts)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		q.wake.notify()
	}
	return manyResults(len(args), keyed), nil
}

// EnqueueManyResultsTx is EnqueueManyResults inside the caller's
// transaction tx, as EnqueueManyTx: the jobs written exist, and hold their
// keys, only if tx commits. The results hold for what tx sees: a duplicate
// of a job that tx wrote earlier (or of one of the same call) names that
// job, which is gone again if tx rolls back. Until tx ends, other
// enqueuers of the keys it took wait for it.
func (q *Queue) EnqueueManyResultsTx(ctx context.Context, tx *sql.Tx, args []JobArgs, opts ...EnqueueOption) ([]EnqueueResult, error) {
	if tx == nil {
		return nil, errors.New("jobqueue: EnqueueManyResultsTx: the transaction is nil; use EnqueueManyResults")
	}
	_, keyed, err := q.enqueueMany(ctx, tx, args, opts)
	if err != nil {
		return nil, err
	}
	return manyResults(len(args), keyed), nil
}

// manyResults is the results of an EnqueueMany of total jobs whose keyed
// jobs were written (or found duplicates) as keyed says.
func manyResults(total int, keyed []keyedJob) []EnqueueResult {
	res := make([]EnqueueResult, total)
	for _, k := range keyed {
		res[k.at] = EnqueueResult{ID: k.id, Duplicate: k.dup}
	}
	return res
}

// enqueueMany writes the jobs of EnqueueMany and its variants, in tx or on
// its own, and returns how many it wrote and the keyed jobs, each with its
// id and whether it was a duplicate (nil when no job has a key).
func (q *Queue) enqueueMany(ctx context.Context, tx *sql.Tx, args []JobArgs, opts []EnqueueOption) (int, []keyedJob, error) {
	if len(args) == 0 {
		return 0, nil, nil
	}
	now := q.now()
	if tx == nil {
		if n, ok, err := q.streamMany(ctx, args, opts, now); ok {
			return n, nil, err
		}
	}
	all, jobs, keyed, err := q.prepareMany(args, opts, now)
	if err != nil {
		return 0, nil, err
	}
	if q.enqueueMW == nil {
		n, err := q.writeMany(ctx, tx, jobs, keyed, len(args), now)
		return n, keyed, err
	}
	// The call's Jobs are in the order given (keyed[i].at is each keyed
	// job's place there), so that a middleware can match them to args.
	// The write records each keyed job's id and duplicate in keyed (the
	// call's: the same array), and writeCall copies them to the call's
	// Jobs.
	call := &EnqueueCall{Jobs: make([]EnqueuedJob, len(all)), Many: true, Tx: tx, many: true, plain: jobs, keyed: keyed, tx: tx, now: now}
	for i, j := range all {
		call.Jobs[i] = j.view()
	}
	err = q.enqueueMW(ctx, call)
	return call.n, keyed, err
}

// prepareMany checks the jobs of EnqueueMany and returns them all in the
// order given, and split into those without a unique key (written in
// multi-row statements) and those with one (written one by one, each with
// its place in all).
func (q *Queue) prepareMany(args []JobArgs, opts []EnqueueOption, now time.Time) (all, jobs []*newJob, keyed []keyedJob, err error) {
	typ, at, expires, p, key, err := q.resolve(opts, now)
	if err != nil {
		return nil, nil, nil, err
	}
	jobs = make([]*newJob, len(args))
	for i, a := range args {
		k := key
		if w, ok := a.(withOptions); ok {
			// Options of its own: resolve the call's and the job's.
			var typ string
			var at time.Time
			var expires *time.Time
			var p RetryPolicy
			if typ, at, expires, p, k, err = q.resolve(withOwn(opts, w.opts), now); err == nil {
				jobs[i], err = q.prepareJob(w.args, typ, at, expires, p)
			}
		} else {
			jobs[i], err = q.prepareJob(a, typ, at, expires, p)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("job %d of %d: %w (no job was written)", i, len(args), err)
		}
		if k != nil {
			keyed = append(keyed, keyedJob{j: jobs[i], key: k, at: i})
		}
	}
	all = jobs
	if len(keyed) > 0 {
		jobs = make([]*newJob, 0, len(all)-len(keyed))
		next := 0 // the next keyed job
		for i, j := range all {
			if next < len(keyed) && keyed[next].at == i {
				next++
				continue
			}
			jobs = append(jobs, j)
		}
	}
	return all, jobs, keyed, nil
}

// writeMany writes the checked jobs of EnqueueMany (total of them), in tx
// or in a transaction of its own, and returns how many it wrote (keyed
// duplicates are skipped and marked dup).
func (q *Queue) writeMany(ctx context.Context, tx *sql.Tx, jobs []*newJob, keyed []keyedJob, total int, now time.Time) (int, error) {
	if tx != nil {
		if len(keyed) > 0 {
			if err := q.needUniqueIn(ctx, tx); err != nil {
				return 0, err
			}
		}
		n, err := q.insertInCallersTx(ctx, tx, jobs, keyed, now)
		if err != nil {
			return 0, fmt.Errorf("jobqueue: enqueue %d jobs (none written): %w", total, refusedPayload(err))
		}
		if n > 0 {
			q.notifyCallersCommit() // MySQL: wake workers everywhere, after the commit
		}
		return n, nil
	}
	var n int
	var err error
	inline := false // the COPY notified (PostgreSQL)
	if len(keyed) > 0 {
		if err := q.needUnique(ctx); err != nil {
			return 0, err
		}
		err = q.inOwnTx(ctx, func(d dbtx) error {
			n, err = q.insertAll(ctx, d, jobs, keyed, now)
			return err
		})
	} else {
		n, inline, err = q.insertOwn(ctx, jobs, now)
	}
	if err != nil {
		return 0, q.manyNotWritten(total, err)
	}
	all := jobs
	for _, k := range keyed {
		all = append(all[:len(all):len(all)], k.j)
	}
	if !inline {
		q.notifyEnqueued(notifyPayload(all)) // wake workers everywhere
	}
	q.logger.Debug("jobs enqueued", "count", n)
	q.countEnqueued(ctx, n)
	return n, nil
}

// callersSavepoint names the savepoint of insertInCallersTx.
const callersSavepoint = "jobqueue_enqueue_many"

// insertInCallersTx is insertAll in the caller's transaction tx, all or
// nothing. When the jobs take more than one statement (several chunks of a
// large EnqueueManyTx, jobs with unique keys), a savepoint takes back the
// statements that went through if a later one fails: MySQL and SQLite keep
// the transaction open after a failed statement, and a caller that commits
// its own work after the error would commit part of the jobs (PostgreSQL
// aborts the transaction; there the savepoint leaves it usable, as on the
// other engines). A MySQL deadlock is the exception: the server rolls the
// whole transaction back, the savepoint with it, and the error says so
// (callersTxEnded).
func (q *Queue) insertInCallersTx(ctx context.Context, tx *sql.Tx, jobs []*newJob, keyed []keyedJob, now time.Time) (int, error) {
	d := q.run.onCallers(tx)
	if len(jobs)+len(keyed) <= 1 {
		n, err := q.insertAll(ctx, d, jobs, keyed, now)
		return n, callersTxEnded(err)
	}
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+callersSavepoint); err != nil {
		return 0, fmt.Errorf("set a savepoint in your transaction: %w", err)
	}
	n, err := q.insertAll(ctx, d, jobs, keyed, now)
	if err != nil {
		if isMySQLError(err, 1213) {
			return 0, callersTxEnded(err) // the savepoint went with the transaction
		}
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+callersSavepoint); rerr != nil {
			return 0, errors.Join(err, fmt.Errorf("and the jobs written before it could not be taken back (roll your transaction back): %w", rerr))
		}
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+callersSavepoint); err != nil {
		return 0, fmt.Errorf("release the savepoint in your transaction: %w", err)
	}
	return n, nil
}

// callersTxEnded is err of a write in the caller's transaction, saying so
// when it was a MySQL deadlock (error 1213, also a Galera certification
// conflict): the server then rolled the whole transaction back, savepoints
// included, so nothing of it remains, and the caller runs it again.
func callersTxEnded(err error) error {
	if !isMySQLError(err, 1213) {
		return err
	}
	return fmt.Errorf("%w (the server rolled your whole transaction back: nothing of it remains, these jobs included; roll it back and run it again)", err)
}

// insertOwn writes jobs (without keys) in a transaction of the queue's own:
// on PostgreSQL with COPY (copy_postgres.go), elsewhere (or when the pool's
// driver has no COPY, the table's columns do not fit it, or the queue runs
// through a transaction pooler, where the COPY's look at the column types
// would prepare a statement in the session) in multi-row statements. It
// reports whether the write also notified workers: the COPY does when the
// notifier is idle (pgNotifier.inline), so that a bulk enqueue's commit
// carries its notification instead of a transaction of its own beside it.
func (q *Queue) insertOwn(ctx context.Context, jobs []*newJob, now time.Time) (int, bool, error) {
	if pg, ok := q.st.(pgStore); ok && !q.pooled && pg.r.copyFormat.Load() != copyNone {
		payload := notifyPayload(jobs)
		inline := q.notifier != nil && q.notifier.inline()
		err := pg.copyOwn(ctx, q.db, jobs, now, inline, payload)
		if !errors.Is(err, errNoPgx) && !errors.Is(err, errNoCopy) {
			if err != nil {
				return 0, false, err
			}
			return len(jobs), inline, nil
		}
	}
	own, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	defer own.Rollback()
	if err := q.st.insertMany(ctx, q.run.on(own), jobs, now); err != nil {
		return 0, false, err
	}
	return len(jobs), false, own.Commit()
}

// keyedJob is a job of EnqueueMany with a unique key.
type keyedJob struct {
	j   *newJob
	key *uniqueKey
	// at is the job's index in EnqueueCall.Jobs (and in the call's
	// args); once written, id is the job's id, or for a duplicate (dup
	// set: the write found its key taken) the id of the job holding it.
	at  int
	id  int64
	dup bool
}

// insertAll writes jobs in multi-row statements and the keyed jobs one by
// one (a duplicate is skipped), on d, and returns how many it wrote; each
// keyed job gets its id (a duplicate the holder's) and dup.
func (q *Queue) insertAll(ctx context.Context, d dbtx, jobs []*newJob, keyed []keyedJob, now time.Time) (int, error) {
	if len(jobs) > 0 {
		if err := q.st.insertMany(ctx, d, jobs, now); err != nil {
			return 0, err
		}
	}
	n := len(jobs)
	for i := range keyed {
		k := &keyed[i]
		id, err := q.takeKey(ctx, d, k.j, k.key, now)
		k.id, k.dup = id, errors.Is(err, ErrDuplicate)
		switch {
		case k.dup:
		case err != nil:
			return 0, err
		default:
			n++
		}
	}
	return n, nil
}

// analyzeAfter is how many jobs a Queue enqueues in transactions of its own
// (single Enqueues and EnqueueMany alike) before it refreshes the table's
// planner statistics.
const analyzeAfter = 1000

// countEnqueued counts n jobs the queue committed itself and refreshes the
// table's planner statistics (analyzeOnce) once the count reaches
// analyzeAfter, so that a new table filled by single Enqueues gets them as
// one filled by EnqueueMany does.
func (q *Queue) countEnqueued(ctx context.Context, n int) {
	if q.analyzed.Load() {
		return
	}
	if q.enqueued.Add(int64(n)) >= analyzeAfter {
		q.analyzeOnce(ctx)
	}
}

// analyzeOnce refreshes the table's planner statistics once per Queue,
// after it enqueued analyzeAfter jobs. A new PostgreSQL table has none until
// autovacuum's first analyze (a minute or more later), and meanwhile the
// planner sorts every pending job on each claim instead of reading the
// index in order, which makes a burst on a new table slow. A failure (for
// example a role that does not own the table) is logged and not retried.
func (q *Queue) analyzeOnce(ctx context.Context) {
	if q.analyzed.Swap(true) {
		return
	}
	if err := q.st.analyze(ctx); err != nil {
		q.logger.Info("could not refresh the table's planner statistics; autovacuum will", "err", err)
	}
}
