package queue

// The first Enqueue after a quiet spell on PostgreSQL (the one whose insert
// notifies: pgNotifier.inline) is visible before its WAL flush ends.
//
// A commit with synchronous_commit on makes its rows visible, and sends its
// notifications, only once the WAL is flushed up to it; on this machine that
// flush is the largest part of an idle worker's enqueue-to-start (0.3-0.7 ms
// on a quiet disk after 10 ms idle, 3-6 ms under other users' load), and the
// claim could only start after it. So that Enqueue sends, in one round trip
// (a pipeline with a sync point after the first), two transactions:
//   - a set_config of synchronous_commit off, local to the transaction, and
//     InsertJobNotify, committed by the sync point (the statements a
//     pipeline sends up to a sync are one implicit transaction, without
//     BEGIN or COMMIT): the job is visible and its NOTIFY delivered at
//     once, and listening workers claim it while
//   - FlushCommits, a transaction of its own that writes one WAL record and
//     commits at the session's synchronous_commit, waits for the flush (and
//     for synchronous standbys) up to its record, and so up to the insert's
//     commit, which lies before it in the WAL.
// Enqueue returns after the second commit: an enqueued job is durable when
// Enqueue returns, as before, and the call costs the same round trip. The
// sync point between the two makes the server send the first one's results
// at once (it holds a pipeline's results back until a sync), so this
// process's idle workers are woken (dbtx.visible) when the commit's result
// arrives, while the flush runs: traced in bench's latency phase, their
// claim starts 0.05-0.06 ms sooner than on the NOTIFY, which arrives at
// about the same time but one more server process away.
//
// The price: a job may start before its Enqueue has returned, while the
// flush runs. A server crash within that flush (about a millisecond) loses
// the job after its handler may have started (its claim is lost too, and the
// handler's result is fenced off: the row is gone); that Enqueue returns an
// error, and as for any Enqueue error (README, Running at scale) the job may
// or may not exist: enqueue it again, with a unique key if a second run
// matters. That is the duplicate the claim session already allows (a claim
// lost in a crash runs its job again, SPEC 12), no acknowledged job is lost,
// and each of the queue's other writes commits as before.
//
// When an idle worker of this process wants the job's type, its next claim
// goes in the insert's transaction, after the insert (claim_offer.go): a
// set_config of synchronous_commit off and plan_cache_mode
// force_generic_plan, both local (the claim is planned once per connection,
// as on a claim session; a custom plan cost more than the claim); InsertJob,
// which does not notify; the claim; NotifyUnclaimed, the job's NOTIFY, sent
// only when the claim left the job pending; the sync point that commits.
// The claimed rows arrive with the commit's result and go to that worker at
// once, without its own round trip, and no other worker is woken for a job
// already taken.
//
// Every statement of the pipeline is prepared on the connection (pgx keeps
// them), so the server parses and plans none: traced after 10 ms idle, the
// unnamed BEGIN, set_config and COMMIT cost 40-60 µs of the round trip.
//
// The bursts that follow within announceGap, EnqueueTx, EnqueueMany and
// unique enqueues insert as before. So does this Enqueue when the queue runs
// through a transaction pooler, when the pool's driver is not pgx's stdlib,
// or when the session may not run pg_logical_emit_message (CanFlushCommits,
// asked once per queue).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobqueue/jobqueue/db/pggen"
)

// pgEarly is a queue's state of the early commit: whether the session may
// run FlushCommits (earlyUnknown until first asked), and the logger of the
// answer.
type pgEarly struct {
	state atomic.Int32
	log   *slog.Logger
}

// States of pgEarly.state: not asked yet, FlushCommits allowed, not allowed
// (or the question failed).
const (
	earlyUnknown int32 = iota
	earlyAllowed
	earlyRefused
)

// errNoEarly: the early commit is not at hand (see above); nothing was sent
// but, maybe, CanFlushCommits, and the caller inserts as before.
var errNoEarly = errors.New("jobqueue: internal: the early commit is unavailable")

// earlyMayRun reports whether the early commit may be at hand: not through
// a transaction pooler, not on a driver other than pgx's stdlib, and not
// with FlushCommits refused (until first asked, it may).
func (s pgStore) earlyMayRun() bool {
	return s.early != nil && !s.r.pooled && !s.r.noPgx.Load() && s.early.state.Load() != earlyRefused
}

// takesOffers reports whether an enqueue may run an idle claimer's claim
// (offerTaker): only the early commit does (claim_offer.go).
func (s pgStore) takesOffers() bool { return s.earlyMayRun() }

// insertEarly writes j as the first enqueue after a quiet spell (see
// above) and returns its id, or errNoEarly, having written nothing, when
// the early commit is unavailable. It takes the offer of an idle claimer
// of this process that wants j's type, if any (claim_offer.go), and sends
// its claim in the insert's transaction; a claim that fails the
// transaction is dropped and the job sent again without it.
func (s pgStore) insertEarly(ctx context.Context, d dbtx, j *newJob, now time.Time) (int64, error) {
	if !s.earlyMayRun() {
		return 0, errNoEarly
	}
	if s.early.state.Load() == earlyUnknown {
		s.askEarly(ctx)
		if s.early.state.Load() != earlyAllowed {
			return 0, errNoEarly
		}
	}
	var o *claimOffer
	if !j.scheduledAt.After(now) { // a job not due yet is no claim's
		o = d.offers.take(j.typ)
	}
	id, claimFault, err := s.insertEarlyWith(ctx, d, j, now, o)
	if claimFault {
		// The offered claim failed, and the insert with it: nothing was
		// written, and the claimer was told.
		id, _, err = s.insertEarlyWith(ctx, d, j, now, nil)
	}
	return id, err
}

// insertEarlyWith is insertEarly with the claim of offer o (nil: none),
// which it settles whatever happens; claimFault reports that the claim
// failed the transaction, so that nothing was written.
func (s pgStore) insertEarlyWith(ctx context.Context, d dbtx, j *newJob, now time.Time, o *claimOffer) (id int64, claimFault bool, err error) {
	var claimed []*JobRow
	settled := false
	settle := func(rows []*JobRow, err error) {
		if o != nil && !settled {
			settled = true
			o.settle(rows, err)
		}
	}
	defer func() { settle(nil, cmp.Or(err, errOfferNotRun)) }() // a no-op once settled
	// Without an offer the insert notifies (InsertJobNotify); with one,
	// InsertJob, the claim and NotifyUnclaimed, which notifies only when
	// the claim left the job pending.
	var flush, claim, notify queryRecorder
	ins := queryRecorder{row: s.r.recorded} // InsertJob and InsertJobNotify scan a row
	if o == nil {
		_, err := pggen.New(&ins).InsertJobNotify(ctx, s.insertNotifyParams(j, now))
		if err := recordingFailed("InsertJobNotify", err); err != nil {
			return 0, false, err
		}
	} else {
		_, err := pggen.New(&ins).InsertJob(ctx, s.insertParams(j, now))
		if err := recordingFailed("InsertJob", err); err != nil {
			return 0, false, err
		}
		c := pgClaimFor(o.types, o.max, newClaimToken(), now, now.Add(o.lease), o.after)
		_, err = c(ctx, pggen.New(&claim))
		if err := recordingFailed("the offered claim", err); err != nil {
			return 0, false, err
		}
		np := pggen.NotifyUnclaimedParams{Channel: s.channel(), TableName: s.r.quoted}
		if err := recordingFailed("NotifyUnclaimed", pggen.New(&notify).NotifyUnclaimed(ctx, np)); err != nil {
			return 0, false, err
		}
	}
	if err := recordingFailed("FlushCommits", pggen.New(&flush).FlushCommits(ctx)); err != nil {
		return 0, false, err
	}
	// The statements of the table, in pipeline order: prepared below like
	// the settings and FlushCommits, and dropped after a failure.
	recorded := []*queryRecorder{&ins, &claim, &notify}
	if o == nil {
		recorded = recorded[:1]
	}
	texts := make([]string, len(recorded))
	for i, r := range recorded {
		if texts[i], err = s.r.text(r.query); err != nil {
			return 0, false, err
		}
	}
	flushText, err := s.r.text(flush.query)
	if err != nil {
		return 0, false, err
	}
	if err := fenced(ctx); err != nil {
		return 0, false, err
	}
	conn, err := s.r.db.Conn(ctx)
	if err != nil {
		return 0, false, err
	}
	defer conn.Close()
	err = onPgx(conn, func(pc *pgx.Conn) (err error) {
		committed := false
		for _, text := range texts {
			d.seen(text)
		}
		d.seen(flushText)
		// Every statement is prepared on the connection (once: pgx keeps
		// them), so that the pipeline below sends each by its description
		// and the server parses and plans none of them: after an idle
		// spell, parsing the set_config alone cost some 40 µs.
		stmts := make([]*pgconn.StatementDescription, len(texts))
		params := make([]pgx.ExtendedQueryBuilder, len(texts))
		for i, text := range texts {
			if stmts[i], err = pc.Prepare(ctx, text, text); err != nil {
				return err
			}
			if err := params[i].Build(pc.TypeMap(), stmts[i], s.r.args(recorded[i].args)); err != nil {
				return fmt.Errorf("jobqueue: internal: encoding the arguments of %.40q: %v", text, err)
			}
		}
		set := earlySettings
		if o != nil {
			set = earlyClaimSettings
		}
		setSD, err := pc.Prepare(ctx, set, set)
		if err != nil {
			return err
		}
		flushSD, err := pc.Prepare(ctx, flushText, flushText)
		if err != nil {
			return err
		}
		pctx := ctx // the pipeline's
		if o != nil {
			// Once sent, the insert and the offered claim commit whatever
			// the caller's context does (the server runs the pipeline to
			// its sync even when pgx closes the connection), and a claim
			// whose result is not read is lost to the claimer until its
			// lease passes: read it to its end, as a combined enqueue
			// waits for its statement, within dbCallTimeout.
			if err := ctx.Err(); err != nil {
				return err
			}
			var cancel context.CancelFunc
			pctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), dbCallTimeout)
			defer cancel()
		}
		// No BEGIN and no COMMIT: what the pipeline sends up to its first
		// sync point is one transaction, which the sync commits (the
		// extended protocol's implicit transaction; an error in any of
		// its statements rolls all of them back). The settings are local
		// to it.
		p := pc.PgConn().StartPipeline(pctx)
		p.SendQueryStatement(setSD, nil, nil, nil)
		for i, sd := range stmts {
			p.SendQueryStatement(sd, params[i].ParamValues, params[i].ParamFormats, params[i].ResultFormats)
		}
		// The sync point commits, and makes the server send the results
		// so far at once (it holds a pipeline's results back until a
		// sync), so the commit's arrives while the flush runs.
		p.SendPipelineSync()
		p.SendQueryStatement(flushSD, nil, nil, nil)
		var claimInto *[]*JobRow
		if o != nil {
			claimInto = &claimed
		}
		onCommit := func() {
			sortClaimed(claimed)
			settle(claimed, nil)
			if d.visible != nil {
				d.visible(slices.ContainsFunc(claimed, func(r *JobRow) bool { return r.ID == id }))
			}
		}
		err = p.Sync()
		if err == nil {
			committed, claimFault, err = readEarly(p, pc.TypeMap(), &id, claimInto, onCommit)
		}
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			return nil
		}
		if !committed && !pc.IsClosed() {
			// A prepared statement may be what failed (gone stale when
			// the table changed under it, which pgx's own statement cache
			// would notice): prepare it anew next time.
			for _, text := range texts {
				if derr := pc.Deallocate(pctx, text); derr != nil {
					return badConnIfClosed(pc, errors.Join(err, derr, errBadSession))
				}
			}
		}
		if committed {
			return fmt.Errorf("the job (id %d) was committed but waiting for its WAL flush failed, so it may be lost if the server crashed: %w", id, err)
		}
		return badConnIfClosed(pc, err)
	})
	if errors.Is(err, errNoPgx) {
		s.r.noPgx.Store(true)
		return 0, false, errNoEarly
	}
	if errors.Is(err, errBadSession) {
		discardConn(conn)
	}
	return id, claimFault, err // readEarly reports a claim fault only before the commit
}

// The settings of the early insert's transaction, local to it: its commit
// does not wait for the WAL flush, and with an offered claim (a claim
// session's statement, planned once per connection) the claim runs on its
// generic plan (a custom plan cost more than the claim). One statement for
// both: the extended protocol takes one command per message.
const (
	earlySettings      = "SELECT set_config('synchronous_commit', 'off', true)"
	earlyClaimSettings = "SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)"
)

// errOfferNotRun tells a claimer that the enqueue which took its offer did
// not run the claim (it failed before, or the early commit was
// unavailable): nothing was claimed for it.
var errOfferNotRun = errors.New("jobqueue: internal: the offered claim was not run")

// errBadSession marks a connection whose prepared statements could not be
// dropped after a failure: it is discarded.
var errBadSession = errors.New("the connection's prepared statements could not be dropped, so the connection is discarded")

// readEarly reads the results of insertEarly's pipeline in order, the new
// id into id (decoded with types) and, when claimed is not nil, the rows of
// the offered claim sent after the insert into claimed. It reports whether
// the insert's transaction committed (at the pipeline's first sync point)
// and whether the claim failed (claimFault: the transaction failed with it,
// and nothing was written). It calls onCommit as soon as that commit's
// result arrives, while the flush still runs.
func readEarly(p *pgconn.Pipeline, types *pgtype.Map, id *int64, claimed *[]*JobRow, onCommit func()) (committed, claimFault bool, err error) {
	next := func() (*pgconn.ResultReader, error) {
		res, err := p.GetResults()
		if err != nil {
			return nil, err
		}
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			return nil, fmt.Errorf("jobqueue: internal: the early insert's pipeline returned %T where a statement's result was due", res)
		}
		return rr, nil
	}
	exec := func() error {
		rr, err := next()
		if err != nil {
			return err
		}
		_, err = rr.Close()
		return err
	}
	// sync reads a sync point's result; one that ends a transaction
	// carries the commit's error, if any.
	sync := func() error {
		res, err := p.GetResults()
		if err != nil {
			return err
		}
		if _, ok := res.(*pgconn.PipelineSync); !ok {
			return fmt.Errorf("jobqueue: internal: the early insert's pipeline returned %T where its sync was due", res)
		}
		return nil
	}
	if err := exec(); err != nil { // the settings
		return false, false, err
	}
	rr, err := next() // InsertJobNotify, or InsertJob
	if err != nil {
		return false, false, err
	}
	rows := 0
	for rr.NextRow() {
		rows++
		f := rr.FieldDescriptions()
		if err := types.Scan(f[0].DataTypeOID, f[0].Format, rr.Values()[0], id); err != nil {
			rr.Close()
			return false, false, fmt.Errorf("jobqueue: internal: reading the new job's id: %v", err)
		}
	}
	if _, err := rr.Close(); err != nil {
		return false, false, err
	}
	if rows != 1 {
		return false, false, fmt.Errorf("jobqueue: internal: the insert returned %d rows", rows)
	}
	if claimed != nil {
		rr, err := next() // the offered claim
		if err == nil {
			*claimed, err = scanClaimed(pgx.RowsFromResultReader(types, rr), nil)
		}
		if err == nil {
			err = exec() // NotifyUnclaimed
		}
		if err != nil {
			// The server refused the claim or its notify: the
			// transaction failed with it (a pipeline skips to the next
			// sync after an error, and the sync rolls back). Anything
			// else (a broken connection) leaves the outcome unknown.
			var pgErr *pgconn.PgError
			return false, errors.As(err, &pgErr), err
		}
	}
	if err := sync(); err != nil { // the commit
		return false, false, err
	}
	onCommit()
	if err := exec(); err != nil { // FlushCommits
		return true, false, err
	}
	return true, false, sync()
}

// askEarly asks once whether the session may run FlushCommits and records
// the answer (an error the server gives the question itself counts as no,
// logged). A failure that says nothing about the question (the caller's
// context ended, the connection was lost, the server is restarting) leaves
// it unasked, to ask again at the next first Enqueue after a quiet spell:
// taken for a no, it turned the early commit, and the claims enqueues run
// for idle workers (takesOffers), off for the life of the queue.
func (s pgStore) askEarly(ctx context.Context) {
	ok, err := pggen.New(rawDBTX{r: s.r, db: s.r.db}).CanFlushCommits(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return // the caller's context ended: ask again next time
	case err != nil && !earlyQuestionRefused(err):
		s.early.log.Debug("asking whether pg_logical_emit_message may run failed; asking again at the next enqueue", "err", err)
		return
	case err != nil:
		s.early.log.Warn("cannot tell whether pg_logical_emit_message may run; the first Enqueue after a quiet spell waits for its WAL flush before workers see it", "err", err)
		s.early.state.CompareAndSwap(earlyUnknown, earlyRefused)
	case !ok:
		s.early.log.Info("pg_logical_emit_message is not granted to this role; the first Enqueue after a quiet spell waits for its WAL flush before workers see it (GRANT EXECUTE to start such jobs sooner)")
		s.early.state.CompareAndSwap(earlyUnknown, earlyRefused)
	default:
		s.early.state.CompareAndSwap(earlyUnknown, earlyAllowed)
	}
}

// earlyQuestionRefused reports whether err, the failure of CanFlushCommits,
// is the server's answer to the question itself: the statement is refused
// there (SQLSTATE class 42, syntax error or access rule violation, or 0A,
// feature not supported), so asking again would fail the same way. Other
// failures (class 08 connection, 57 operator intervention such as a
// restart, 53 insufficient resources, no answer at all) may pass.
func earlyQuestionRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "42") || strings.HasPrefix(pgErr.Code, "0A"))
}
