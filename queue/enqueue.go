package queue

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// EnqueueOption sets something about an enqueued job (for EnqueueMany,
// about every job of the call).
type EnqueueOption func(*enqueueOpts)

type enqueueOpts struct {
	typ       *string
	at        *time.Time
	delay     *time.Duration
	expiresAt *time.Time
	expiresIn *time.Duration
	policy    *RetryPolicy
	uniqueKey *string
	uniqueFor *time.Duration
}

// Type puts the job in the named queue (default "default"); workers claim
// the types they are configured for. At most 64 characters.
func Type(name string) EnqueueOption { return func(o *enqueueOpts) { o.typ = &name } }

// At schedules the job's first attempt no earlier than t (default now).
func At(t time.Time) EnqueueOption { return func(o *enqueueOpts) { o.at = &t } }

// Delay schedules the job's first attempt d from now.
func Delay(d time.Duration) EnqueueOption { return func(o *enqueueOpts) { o.delay = &d } }

// ExpiresAt gives the job a deadline: once t has passed it is not started
// any more and ends expired. It must not be before the job's scheduled time.
func ExpiresAt(t time.Time) EnqueueOption { return func(o *enqueueOpts) { o.expiresAt = &t } }

// ExpiresIn gives the job a deadline d from now (see ExpiresAt).
func ExpiresIn(d time.Duration) EnqueueOption { return func(o *enqueueOpts) { o.expiresIn = &d } }

// Policy sets the job's retry policy instead of the queue's.
func Policy(p RetryPolicy) EnqueueOption { return func(o *enqueueOpts) { o.policy = &p } }

// Limits of the table's columns (characters).
const (
	maxKindLen = 255
	maxTypeLen = 64
)

// DefaultType is the type of a job enqueued without Type.
const DefaultType = "default"

// resolve checks the options against each other and returns the job's
// type, schedule, deadline and policy as of now.
func (q *Queue) resolve(opts []EnqueueOption, now time.Time) (typ string, at time.Time, expires *time.Time, p RetryPolicy, key *uniqueKey, err error) {
	var o enqueueOpts
	for _, fn := range opts {
		if fn != nil {
			fn(&o)
		}
	}
	typ = DefaultType
	if o.typ != nil {
		typ = *o.typ
	}
	if typ == "" {
		return "", at, nil, p, nil, fmt.Errorf("%w: the type is empty; leave Type out for %q", ErrInvalidJob, DefaultType)
	}
	if problem := typeProblem(typ); problem != "" {
		return "", at, nil, p, nil, fmt.Errorf("%w: %s", ErrInvalidJob, problem)
	}
	if o.at != nil && o.delay != nil {
		return "", at, nil, p, nil, fmt.Errorf("%w: both At and Delay are given; use one", ErrInvalidJob)
	}
	if o.expiresAt != nil && o.expiresIn != nil {
		return "", at, nil, p, nil, fmt.Errorf("%w: both ExpiresAt and ExpiresIn are given; use one", ErrInvalidJob)
	}
	at = now
	switch {
	case o.at != nil:
		at = o.at.UTC()
	case o.delay != nil:
		at = now.Add(*o.delay)
	}
	switch {
	case o.expiresAt != nil:
		t := o.expiresAt.UTC()
		expires = &t
	case o.expiresIn != nil:
		t := now.Add(*o.expiresIn)
		expires = &t
	}
	if err := checkYear("scheduled time", at); err != nil {
		return "", at, nil, p, nil, err
	}
	if expires != nil {
		if err := checkYear("deadline", *expires); err != nil {
			return "", at, nil, p, nil, err
		}
	}
	if expires != nil && expires.Before(at) {
		return "", at, nil, p, nil, fmt.Errorf("%w: the deadline %s is before the scheduled time %s", ErrInvalidJob, expires.Format(time.RFC3339), at.Format(time.RFC3339))
	}
	p = q.policy
	if o.policy != nil {
		p = *o.policy
		if err := p.Validate(); err != nil {
			return "", at, nil, p, nil, err
		}
	}
	if key, err = resolveUnique(&o, now); err != nil {
		return "", at, nil, p, nil, err
	}
	return typ, at, expires, p, key, nil
}

// typeProblem says what is wrong with a type name, or "" when nothing is:
// the type column is VARCHAR(64), so a type has 1 to 64 characters (not
// bytes) of valid UTF-8. Enqueue and WorkerConfig apply this one rule.
func typeProblem(typ string) string {
	switch n := utf8.RuneCountInString(typ); {
	case n == 0:
		return "the type is empty"
	case !utf8.ValidString(typ):
		return fmt.Sprintf("the type %q is not valid UTF-8", typ)
	case n > maxTypeLen:
		return fmt.Sprintf("the type %.20q… has %d characters; at most %d are allowed", typ, n, maxTypeLen)
	}
	return ""
}

// checkYear refuses a time outside the years 1 to 9999, which every engine
// stores alike: MySQL's DATETIME ends at 9999, and SQLite compares times as
// fixed-width text, so a five-digit year would sort before the present and
// the job would run at once. (Such a time is usually a unit mistake, like
// milliseconds given to time.Unix.)
func checkYear(what string, t time.Time) error {
	if y := t.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%w: the %s %s is outside the years 1 to 9999 that the table can store; check how the time is computed", ErrInvalidJob, what, t.Format(time.RFC3339))
	}
	return nil
}

// prepareJob validates args and turns them into a job to write.
func (q *Queue) prepareJob(args JobArgs, typ string, at time.Time, expires *time.Time, p RetryPolicy) (*newJob, error) {
	if args == nil {
		return nil, fmt.Errorf("%w: the args are nil", ErrInvalidJob)
	}
	if v := reflect.ValueOf(args); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("%w: the args are a nil %T; pass a value", ErrInvalidJob, args)
	}
	kind := args.Kind()
	switch n := utf8.RuneCountInString(kind); {
	case n == 0:
		return nil, fmt.Errorf("%w: Kind() of %T is empty; it names the job and must not be", ErrInvalidJob, args)
	case n > maxKindLen:
		return nil, fmt.Errorf("%w: Kind() of %T has %d characters; at most %d are allowed", ErrInvalidJob, args, n, maxKindLen)
	case !utf8.ValidString(kind):
		return nil, fmt.Errorf("%w: Kind() of %T is not valid UTF-8", ErrInvalidJob, args)
	}
	var payload []byte
	switch raw := args.(type) {
	case RawArgs:
		payload = raw.Payload
	case *RawArgs:
		payload = raw.Payload
	default:
		var err error
		if payload, err = q.codec.Marshal(args); err != nil {
			return nil, fmt.Errorf("%w: encoding %s args: %v", ErrPayloadRejected, kind, err)
		}
	}
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = []byte("{}")
	}
	if !utf8.Valid(payload) {
		return nil, fmt.Errorf("%w: the %s payload is not valid UTF-8", ErrPayloadRejected, kind)
	}
	if !json.Valid(payload) {
		return nil, fmt.Errorf("%w: the codec made no valid JSON for %s args; every engine stores the payload as JSON", ErrPayloadRejected, kind)
	}
	if q.kind == engine.Postgres && hasNULEscape(payload) {
		return nil, fmt.Errorf("%w: the %s payload contains \\u0000, which PostgreSQL's JSONB cannot store; remove NUL characters from the args", ErrPayloadRejected, kind)
	}
	ma, bd, md := p.internal().Seconds()
	return &newJob{
		name: kind, typ: typ, payload: payload,
		maxAttempts: ma, baseDelay: bd, maxDelay: md,
		scheduledAt: at, expiresAt: expires,
	}, nil
}

// hasNULEscape reports whether the JSON text holds the escape \u0000 (an
// escaped backslash followed by "u0000" is not one).
func hasNULEscape(js []byte) bool {
	for i := 0; i < len(js); i++ {
		if js[i] != '\\' {
			continue
		}
		if i+5 < len(js) && js[i+1] == 'u' && string(js[i+2:i+6]) == "0000" {
			return true
		}
		i++ // the escaped character
	}
	return false
}

// Enqueue adds one job and returns its id. It is pending at once (or at
// the time of At/Delay), of type "default" unless Type says otherwise, with
// the queue's retry policy unless Policy says otherwise. Bad input returns
// an error wrapping ErrInvalidJob, ErrPayloadRejected or ErrInvalidPolicy
// and writes nothing.
func (q *Queue) Enqueue(ctx context.Context, args JobArgs, opts ...EnqueueOption) (int64, error) {
	id, err := q.enqueue(ctx, nil, args, opts)
	if err == nil {
		q.wake.notify()
	}
	return id, err
}

// EnqueueTx adds one job inside the caller's transaction: the job exists
// only if tx commits. tx may come from any *sql.DB on the same database.
// On PostgreSQL the commit wakes idle workers everywhere (the insert
// NOTIFYs, see WorkerConfig.PollOnly); elsewhere workers find the job at
// their next poll (the job is not visible when EnqueueTx returns).
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
	var id int64
	if key != nil {
		id, err = q.enqueueKeyed(ctx, tx, j, key, now)
		if errors.Is(err, ErrDuplicate) || errors.Is(err, ErrSideTableMissing) {
			return id, err
		}
	} else {
		d := q.run.on(nil)
		if tx != nil {
			d = q.run.onCallers(tx)
		}
		id, err = q.st.insert(ctx, d, j, now)
	}
	if err != nil {
		return 0, fmt.Errorf("jobqueue: enqueue %s: %w", j.name, refusedPayload(err))
	}
	if tx == nil {
		q.notifyEnqueued(j.typ) // PostgreSQL: wake workers everywhere
		q.countEnqueued(ctx, 1)
	}
	q.logger.Debug("job enqueued", "id", id, "kind", j.name, "type", j.typ, "scheduled_at", at)
	return id, nil
}

// WithOptions gives one job of EnqueueMany (or EnqueueManyTx) options of
// its own, applied after the call's: a unique key per job, say
// (queue.WithOptions(args, queue.UniqueKey("report:42"))). With Enqueue it
// adds to the call's options likewise.
func WithOptions(args JobArgs, opts ...EnqueueOption) JobArgs {
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
	return w.args, append(append([]EnqueueOption(nil), opts...), w.opts...)
}

// EnqueueMany adds jobs in multi-row statements (chunks within the
// engine's limits), all or nothing: one bad job, or a failed statement,
// and none is written; the error names the index of a bad job. The options
// apply to every job. It returns how many jobs were written.
func (q *Queue) EnqueueMany(ctx context.Context, args []JobArgs, opts ...EnqueueOption) (int, error) {
	n, err := q.enqueueMany(ctx, nil, args, opts)
	if err == nil && n > 0 {
		q.wake.notify()
	}
	return n, err
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction.
func (q *Queue) EnqueueManyTx(ctx context.Context, tx *sql.Tx, args []JobArgs, opts ...EnqueueOption) (int, error) {
	if tx == nil {
		return 0, errors.New("jobqueue: EnqueueManyTx: the transaction is nil; use EnqueueMany")
	}
	return q.enqueueMany(ctx, tx, args, opts)
}

func (q *Queue) enqueueMany(ctx context.Context, tx *sql.Tx, args []JobArgs, opts []EnqueueOption) (int, error) {
	if len(args) == 0 {
		return 0, nil
	}
	now := q.now()
	typ, at, expires, p, key, err := q.resolve(opts, now)
	if err != nil {
		return 0, err
	}
	jobs := make([]*newJob, len(args))
	var keyed []keyedJob // the jobs with a unique key, written one by one
	for i, a := range args {
		k := key
		if w, ok := a.(withOptions); ok {
			// Options of its own: resolve the call's and the job's.
			var typ string
			var at time.Time
			var expires *time.Time
			var p RetryPolicy
			all := append(append([]EnqueueOption(nil), opts...), w.opts...)
			if typ, at, expires, p, k, err = q.resolve(all, now); err == nil {
				jobs[i], err = q.prepareJob(w.args, typ, at, expires, p)
			}
		} else {
			jobs[i], err = q.prepareJob(a, typ, at, expires, p)
		}
		if err != nil {
			return 0, fmt.Errorf("job %d of %d: %w (no job was written)", i, len(args), err)
		}
		if k != nil {
			keyed = append(keyed, keyedJob{jobs[i], k})
			jobs[i] = nil
		}
	}
	if len(keyed) > 0 {
		plain := jobs[:0]
		for _, j := range jobs {
			if j != nil {
				plain = append(plain, j)
			}
		}
		jobs = plain
	}
	if tx != nil {
		if len(keyed) > 0 {
			if err := q.needUnique(ctx); err != nil {
				return 0, err
			}
		}
		n, err := q.insertAll(ctx, q.run.onCallers(tx), jobs, keyed, now)
		if err != nil {
			return 0, fmt.Errorf("jobqueue: enqueue %d jobs: %w", len(args), refusedPayload(err))
		}
		return n, nil
	}
	var n int
	if len(keyed) > 0 {
		if err := q.needUnique(ctx); err != nil {
			return 0, err
		}
		err = q.inOwnTx(ctx, func(d dbtx) error {
			n, err = q.insertAll(ctx, d, jobs, keyed, now)
			return err
		})
	} else {
		n, err = q.insertOwn(ctx, jobs, now)
	}
	if err != nil {
		return 0, fmt.Errorf("jobqueue: enqueue %d jobs (none written): %w", len(args), refusedPayload(err))
	}
	all := jobs
	for _, k := range keyed {
		all = append(all[:len(all):len(all)], k.j)
	}
	q.notifyEnqueued(notifyPayload(all)) // PostgreSQL: wake workers everywhere
	q.logger.Debug("jobs enqueued", "count", n, "type", typ)
	q.countEnqueued(ctx, n)
	return n, nil
}

// insertOwn writes jobs (without keys) in a transaction of the queue's own:
// on PostgreSQL with COPY (copy_postgres.go), elsewhere (or when the pool's
// driver has no COPY, or the queue runs through a transaction pooler, where
// pgx's COPY might keep a prepared statement in the session) in multi-row
// statements.
func (q *Queue) insertOwn(ctx context.Context, jobs []*newJob, now time.Time) (int, error) {
	if pg, ok := q.st.(pgStore); ok && !q.pooled {
		err := pg.copyOwn(ctx, q.db, jobs, now)
		if !errors.Is(err, errNoCopy) {
			if err != nil {
				return 0, err
			}
			return len(jobs), nil
		}
	}
	own, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer own.Rollback()
	if err := q.st.insertMany(ctx, q.run.on(own), jobs, now); err != nil {
		return 0, err
	}
	return len(jobs), own.Commit()
}

// keyedJob is a job of EnqueueMany with a unique key.
type keyedJob struct {
	j   *newJob
	key *uniqueKey
}

// insertAll writes jobs in multi-row statements and the keyed jobs one by
// one (a duplicate is skipped), on d, and returns how many it wrote.
func (q *Queue) insertAll(ctx context.Context, d dbtx, jobs []*newJob, keyed []keyedJob, now time.Time) (int, error) {
	if len(jobs) > 0 {
		if err := q.st.insertMany(ctx, d, jobs, now); err != nil {
			return 0, err
		}
	}
	n := len(jobs)
	for _, k := range keyed {
		_, err := q.takeKey(ctx, d, k.j, k.key, now)
		switch {
		case errors.Is(err, ErrDuplicate):
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
