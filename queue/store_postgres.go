package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobqueue/jobqueue/db/pggen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// pgTimeLayout is how the PostgreSQL bulk insert's JSON carries times
// (read as TIMESTAMP, UTC).
const pgTimeLayout = "2006-01-02T15:04:05.999999"

// pgStore runs the generated PostgreSQL queries (db/pggen).
type pgStore struct {
	r *runner
	// early is the state of the early commit of the first Enqueue after a
	// quiet spell (enqueue_postgres_early.go); nil: never early.
	early *pgEarly
}

func (s pgStore) qs() *pggen.Queries { return pggen.New(s.r.on(nil)) }

// channel is the NOTIFY channel of the table: its name as the database
// stores it (the quoted name without its quotes; a valid table name holds
// no quote). ListenJobs listens on the same name, since the rewriting of
// `jobs` turns it into LISTEN "<table>".
func (s pgStore) channel() string { return strings.Trim(s.r.quoted, `"`) }

func (s pgStore) probe(ctx context.Context) error {
	_, err := s.qs().ProbeTable(ctx)
	return err
}

// insert writes one job. In a caller's transaction the statement also
// notifies workers (at the caller's commit); the queue notifies after the
// inserts it commits itself (pgNotifier).
func (s pgStore) insert(ctx context.Context, d dbtx, j *newJob, now time.Time) (int64, error) {
	if d.notify && d.tx == nil {
		// The first enqueue after a quiet spell: visible before its flush.
		if id, err := s.insertEarly(ctx, d, j, now); !errors.Is(err, errNoEarly) {
			return id, err
		}
	}
	qs := pggen.New(d)
	if d.insertNotifies() {
		return qs.InsertJobNotify(ctx, s.insertNotifyParams(j, now))
	}
	return qs.InsertJob(ctx, s.insertParams(j, now))
}

// insertParams are InsertJob's arguments for j.
func (s pgStore) insertParams(j *newJob, now time.Time) pggen.InsertJobParams {
	return pggen.InsertJobParams{
		Name: j.name, Type: j.typ, Payload: json.RawMessage(j.payload),
		MaxAttempts: int32(j.maxAttempts), BaseDelay: int32(j.baseDelay), MaxDelay: int32(j.maxDelay),
		ScheduledAt: j.scheduledAt, ExpiresAt: nullTime(j.expiresAt), CreatedAt: now,
	}
}

// insertNotifyParams are InsertJobNotify's arguments for j: InsertJob's
// and the table's channel.
func (s pgStore) insertNotifyParams(j *newJob, now time.Time) pggen.InsertJobNotifyParams {
	p := s.insertParams(j, now)
	return pggen.InsertJobNotifyParams{
		Channel: s.channel(), Name: p.Name, Type: p.Type, Payload: p.Payload,
		MaxAttempts: p.MaxAttempts, BaseDelay: p.BaseDelay, MaxDelay: p.MaxDelay,
		ScheduledAt: p.ScheduledAt, ExpiresAt: p.ExpiresAt, CreatedAt: p.CreatedAt,
	}
}

// insertMany writes jobs in chunks, notifying in a caller's transaction as
// insert does.
func (s pgStore) insertMany(ctx context.Context, d dbtx, jobs []*newJob, now time.Time) error {
	chunks, err := jsonChunks(jobs, pgTimeLayout)
	if err != nil {
		return err
	}
	qs := pggen.New(d)
	for _, c := range chunks {
		if d.insertNotifies() {
			_, err = qs.InsertJobsJSONNotify(ctx, pggen.InsertJobsJSONNotifyParams{
				CreatedAt: now, Rows: json.RawMessage(c), Channel: s.channel(), NotifyType: notifyPayload(jobs),
			})
		} else {
			_, err = qs.InsertJobsJSON(ctx, pggen.InsertJobsJSONParams{CreatedAt: now, Rows: json.RawMessage(c)})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// insertBatch writes jobs (at most combineMax, of several callers) in one
// statement that commits on its own, and returns their ids in jobs' order.
func (s pgStore) insertBatch(ctx context.Context, jobs []*newJob, now time.Time) ([]int64, error) {
	chunks, err := jsonChunks(jobs, pgTimeLayout)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBatchNotSent, err)
	}
	if len(chunks) != 1 {
		return nil, fmt.Errorf("%w: jobqueue: internal: a batch of %d enqueues makes %d statements, want 1", errBatchNotSent, len(jobs), len(chunks))
	}
	ids, err := s.qs().InsertJobsJSONReturning(ctx, pggen.InsertJobsJSONReturningParams{CreatedAt: now, Rows: json.RawMessage(chunks[0])})
	if err != nil {
		return nil, err
	}
	if len(ids) != len(jobs) {
		return nil, fmt.Errorf("jobqueue: internal: a batch of %d enqueues returned %d ids", len(jobs), len(ids))
	}
	slices.Sort(ids) // the rows' order (InsertJobsJSONReturning)
	return ids, nil
}

func (s pgStore) claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	return s.claimOn(ctx, nil, false, types, max, token, now, leaseUntil, after)
}

// claimOn runs the claim of types' filter (pgClaimFor) on conn, a claim
// session's connection, or on the pool when conn is nil; with turn, after
// its turn (claimPgx; a pool whose driver is not pgx's claims at once).
func (s pgStore) claimOn(ctx context.Context, conn *sql.Conn, turn bool, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	claim := pgClaimFor(types, max, token, now, leaseUntil, after)
	if got, err := s.claimPgx(ctx, conn, claim, token, max, turn); !errors.Is(err, errNoPgx) {
		return got, err
	}
	qs := s.qs()
	if conn != nil {
		qs = pggen.New(s.r.onConn(conn))
	}
	rows, err := claim(ctx, qs)
	if err != nil {
		// database/sql tells no more than the error of what it sent: a
		// connection that broke after the statement went out (not one that
		// could not be made) may have lost a committed claim's answer.
		var connectErr *pgconn.ConnectError
		if connectionLost(err) && !pgconn.SafeToRetry(err) && !errors.As(err, &connectErr) {
			return nil, &claimUnsure{batch: token, err: err}
		}
		return nil, err
	}
	return jobRows(rows), nil
}

// claimedBy returns the attempts that the claim of batch started and that
// still hold their jobs (claimBatches).
func (s pgStore) claimedBy(ctx context.Context, batch string) ([]attemptRef, error) {
	rows, err := s.qs().SelectClaimBatch(ctx, batch)
	if err != nil {
		return nil, err
	}
	refs := make([]attemptRef, len(rows))
	for i, r := range rows {
		refs[i] = attemptRef{ID: r.ID, Token: r.ClaimToken.String}
	}
	return refs, nil
}

// pgClaim runs one claim statement, with its arguments, through qs.
type pgClaim func(ctx context.Context, qs *pggen.Queries) ([]pggen.Job, error)

// pgClaimFor is the claim of up to max jobs of types (every type when
// empty): ClaimJobs, ClaimJobsOfType or ClaimJobsOfTypes, each planned on
// its own (see ClaimJobs in sql/postgres/queries.sql).
func pgClaimFor(types []string, max int, token string, now, leaseUntil time.Time, after claimPos) pgClaim {
	lease := nullTime(&leaseUntil)
	switch len(types) {
	case 0:
		p := pggen.ClaimJobsParams{Token: token, LeaseUntil: lease, Now: now, AfterAt: after.at, AfterID: after.id, MaxJobs: int32(max)}
		return func(ctx context.Context, qs *pggen.Queries) ([]pggen.Job, error) { return qs.ClaimJobs(ctx, p) }
	case 1:
		p := pggen.ClaimJobsOfTypeParams{Token: token, LeaseUntil: lease, Type: types[0], Now: now, AfterAt: after.at, AfterID: after.id, MaxJobs: int32(max)}
		return func(ctx context.Context, qs *pggen.Queries) ([]pggen.Job, error) { return qs.ClaimJobsOfType(ctx, p) }
	default:
		p := pggen.ClaimJobsOfTypesParams{Token: token, LeaseUntil: lease, Types: jsonList(types), Now: now, AfterAt: after.at, AfterID: after.id, MaxJobs: int32(max)}
		return func(ctx context.Context, qs *pggen.Queries) ([]pggen.Job, error) { return qs.ClaimJobsOfTypes(ctx, p) }
	}
}

// pgLockWaitMs is the lock wait, in milliseconds, that a completion or
// lease renewal run under ctx sets as its own lock_timeout: rowLockWait,
// or half of what remains of ctx's time when that is shorter, so that the
// server ends the wait before the client gives up on the statement; at
// least a millisecond (0 would turn the bound off).
func pgLockWaitMs(ctx context.Context) int64 {
	d := rowLockWait
	if end, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(end)/2)
	}
	return max(d.Milliseconds(), 1)
}

func (s pgStore) extend(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (map[int64]bool, error) {
	held, err := s.qs().ExtendLeases(ctx, pggen.ExtendLeasesParams{LeaseUntil: nullTime(&leaseUntil), Tokens: tokenObject(refs), LockWaitMs: pgLockWaitMs(ctx)})
	return idSet(held), err
}

func (s pgStore) extendSkipLocked(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (map[int64]bool, error) {
	held, err := s.qs().ExtendLeasesSkipLocked(ctx, pggen.ExtendLeasesSkipLockedParams{LeaseUntil: nullTime(&leaseUntil), Tokens: tokenObject(refs)})
	return idSet(held), err
}

func (s pgStore) complete(ctx context.Context, refs []attemptRef, now time.Time, del, skipLocked bool) (map[int64]bool, error) {
	var held []int64
	var err error
	switch tokens := tokenObject(refs); {
	case del && skipLocked:
		held, err = s.qs().DeleteCompletedJobsSkipLocked(ctx, tokens)
	case del:
		held, err = s.qs().DeleteCompletedJobs(ctx, pggen.DeleteCompletedJobsParams{Tokens: tokens, LockWaitMs: pgLockWaitMs(ctx)})
	case skipLocked:
		held, err = s.qs().CompleteJobsSkipLocked(ctx, pggen.CompleteJobsSkipLockedParams{Now: nullTime(&now), Tokens: tokens})
	default:
		held, err = s.qs().CompleteJobs(ctx, pggen.CompleteJobsParams{Now: nullTime(&now), Tokens: tokens, LockWaitMs: pgLockWaitMs(ctx)})
	}
	return idSet(held), err
}

func (s pgStore) heldAttempts(ctx context.Context, refs []attemptRef) ([]*JobRow, error) {
	ids, toks := refLists(refs)
	rows, err := s.qs().SelectHeldAttempts(ctx, pggen.SelectHeldAttemptsParams{
		Ids: json.RawMessage(jsonList(ids)), Tokens: json.RawMessage(jsonList(toks)),
	})
	return jobRows(rows), err
}

func (s pgStore) abandoned(ctx context.Context, d dbtx, now time.Time, limit int) ([]*JobRow, error) {
	rows, err := pggen.New(d).SelectAbandoned(ctx, pggen.SelectAbandonedParams{Now: nullTime(&now), MaxRows: int32(limit)})
	return jobRows(rows), err
}

func (s pgStore) endAttempts(ctx context.Context, refs []attemptRef, e attemptEnd) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	held, err := s.qs().EndAttempts(ctx, pggen.EndAttemptsParams{
		Status: string(e.status), Error: nullString(e.errText),
		RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
		Ids: json.RawMessage(jsonList(ids)), Tokens: json.RawMessage(jsonList(toks)),
	})
	return idSet(held), err
}

func (s pgStore) unclaim(ctx context.Context, refs []attemptRef) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	held, err := s.qs().UnclaimJobs(ctx, pggen.UnclaimJobsParams{
		Ids: json.RawMessage(jsonList(ids)), Tokens: json.RawMessage(jsonList(toks)),
	})
	return idSet(held), err
}

func (s pgStore) endAbandoned(ctx context.Context, d dbtx, refs []attemptRef, e attemptEnd, now time.Time) (int64, error) {
	ids, toks := refLists(refs)
	return pggen.New(d).EndAbandonedAttempts(ctx, pggen.EndAbandonedAttemptsParams{
		Status: string(e.status), Error: nullString(e.errText),
		RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
		Ids: json.RawMessage(jsonList(ids)), Tokens: json.RawMessage(jsonList(toks)), Untokened: untokened(refs), Now: nullTime(&now),
	})
}

func (s pgStore) fail(ctx context.Context, ref attemptRef, e attemptEnd) (bool, error) {
	n, err := s.qs().FailJob(ctx, pggen.FailJobParams{
		Status: string(e.status), Error: nullString(e.errText),
		RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
		ID: ref.ID, Token: nullString(ref.Token),
	})
	return n == 1, err
}

func (s pgStore) stats(ctx context.Context, typ string) (map[Status]int64, error) {
	if typ == "" {
		return countsByStatus(s.qs().CountByStatus(ctx))
	}
	return countsByStatus(s.qs().CountByStatusOfType(ctx, typ))
}

// list runs ListJobs planned for its filters (runner.planned): a generic
// plan of its optional filters cannot use the type index.
func (s pgStore) list(ctx context.Context, f ListFilter, beforeID int64, limit int) ([]*JobRow, error) {
	rows, err := pggen.New(s.r.planned()).ListJobs(ctx, pggen.ListJobsParams{
		BeforeID: beforeID, Status: nullString(string(f.Status)), Type: nullString(f.Type), Name: nullString(f.Name), MaxRows: int32(limit),
	})
	return jobRows(rows), err
}

func (s pgStore) listWindow(ctx context.Context, f ListFilter, floorID, beforeID int64, limit int) ([]*JobRow, error) {
	rows, err := pggen.New(s.r.planned()).ListJobsWindow(ctx, pggen.ListJobsWindowParams{
		BeforeID: beforeID, FloorID: floorID, Name: f.Name, Status: nullString(string(f.Status)), MaxRows: int32(limit),
	})
	return jobRows(rows), err
}

func (s pgStore) idBelow(ctx context.Context, beforeID int64) (int64, bool, error) {
	return firstOf(s.qs().JobIDBelow(ctx, beforeID))
}

func (s pgStore) get(ctx context.Context, id int64) (*JobRow, error) {
	r, found, err := firstOf(s.qs().GetJob(ctx, id))
	if !found {
		return nil, err
	}
	return jobRow(r), nil
}

func (s pgStore) expire(ctx context.Context, d dbtx, now time.Time, max int) (int64, error) {
	return pggen.New(d).ExpireOverdue(ctx, pggen.ExpireOverdueParams{Now: nullTime(&now), MaxRows: int32(max)})
}

func (s pgStore) prune(ctx context.Context, d dbtx, cutoff time.Time, batch int) (int64, error) {
	return pggen.New(d).PruneFinished(ctx, pggen.PruneFinishedParams{Cutoff: nullTime(&cutoff), MaxRows: int32(batch)})
}

func (s pgStore) analyze(ctx context.Context) error {
	return s.qs().AnalyzeTable(ctx)
}

func (s pgStore) purge(ctx context.Context) (int64, error) {
	return s.qs().PurgeJobs(ctx)
}

func (s pgStore) leaderFence(ctx context.Context, d dbtx, role, holder string, term int64, idle time.Duration) (bool, time.Time, error) {
	rows, err := pggen.New(d).FenceLeaderAct(ctx, pggen.FenceLeaderActParams{
		IdleMs: strconv.FormatInt(max(idle.Milliseconds(), 1), 10), Name: role, FenceName: fenceRowName(role), Holder: holder, Term: term,
	})
	if err != nil || len(rows) != 1 {
		return false, time.Time{}, err
	}
	return true, engine.AsUTC(rows[0].DbNow), nil
}

func (s pgStore) leaderEnsure(ctx context.Context, role string) error {
	return s.qs().EnsureLeaderRow(ctx, role)
}

func (s pgStore) leaderAcquire(ctx context.Context, role, holder string, lease time.Duration) (bool, error) {
	return acquireLeader(ctx, s, role, holder, lease)
}

func (s pgStore) acquireLeaderOn(ctx context.Context, role, holder string, lease time.Duration) (bool, error) {
	n, err := s.qs().AcquireLeader(ctx, pggen.AcquireLeaderParams{Holder: holder, LeaseSeconds: lease.Seconds(), Name: role})
	return n == 1, err
}

func (s pgStore) leaderFenceBehind(ctx context.Context, role, holder string) (int64, bool, error) {
	return firstOf(s.qs().LeaderFenceBehind(ctx, pggen.LeaderFenceBehindParams{Name: role, Holder: holder, FenceName: fenceRowName(role)}))
}

func (s pgStore) setLeaderFence(ctx context.Context, role, holder string, term int64) error {
	return s.qs().SetLeaderFence(ctx, pggen.SetLeaderFenceParams{FenceName: fenceRowName(role), Holder: holder, Term: term})
}

func (s pgStore) leaderRelease(ctx context.Context, role, holder string) error {
	_, err := s.qs().ReleaseLeader(ctx, pggen.ReleaseLeaderParams{Name: role, Holder: holder})
	return err
}

func (s pgStore) leaderGet(ctx context.Context, role string) (*leaderRow, error) {
	r, err := s.qs().GetLeader(ctx, role)
	return leaderRowOf(r, err, serverTime)
}

func idSet[T int64 | uint64](ids []T) map[int64]bool {
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[int64(id)] = true
	}
	return m
}

func (s pgStore) cancel(ctx context.Context, ids []int64, o attemptEnd) (map[int64]bool, map[int64]Status, []cancelledRun, error) {
	rows, err := s.qs().CancelJobs(ctx, pggen.CancelJobsParams{
		Status: string(o.status), Error: nullString(o.errText), FinishedAt: nullTime(nullableTime(o.finishedAt)),
		Ids: json.RawMessage(jsonList(ids)),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	done := make(map[int64]bool, len(rows))
	var ran []cancelledRun
	for _, r := range rows {
		done[r.ID] = true
		if Status(r.OldStatus) == StatusInProgress {
			ran = append(ran, cancelledRun{typ: r.Type, lease: timePtr(r.OldLeaseUntil)})
		}
	}
	done, others, err := controlRest(ids, done, s.statuses(ctx))
	return done, others, ran, err
}

func (s pgStore) deleteJobs(ctx context.Context, ids []int64) (map[int64]bool, map[int64]Status, error) {
	done, err := s.qs().DeleteJobs(ctx, json.RawMessage(jsonList(ids)))
	if err != nil {
		return nil, nil, err
	}
	return controlRest(ids, idSet(done), s.statuses(ctx))
}

// statuses is JobStatuses for controlRest.
func (s pgStore) statuses(ctx context.Context) func(ids string) ([]pggen.JobStatusesRow, error) {
	return func(ids string) ([]pggen.JobStatusesRow, error) { return s.qs().JobStatuses(ctx, json.RawMessage(ids)) }
}

// notifyCancelled tells the workers listening on the table's channel which
// jobs were cancelled, so that they stop their handlers at once.
func (s pgStore) notifyCancelled(ctx context.Context, ids []int64) error {
	return s.qs().NotifyTypes(ctx, pggen.NotifyTypesParams{
		Channel: s.channel(), Types: json.RawMessage(jsonList(cancelPayloads(ids))),
	})
}

func (s pgStore) probeUnique(ctx context.Context, d dbtx) error {
	_, err := pggen.New(d).ProbeUnique(ctx)
	return err
}

// insertUnique runs InsertUniqueJob: one statement takes the key and
// inserts the job. In a caller's transaction it then notifies, as insert
// does (the notification rides the commit).
func (s pgStore) insertUnique(ctx context.Context, d dbtx, j *newJob, k uniqueKey, now time.Time) (int64, bool, error) {
	qs := pggen.New(d)
	ids, err := qs.InsertUniqueJob(ctx, pggen.InsertUniqueJobParams{
		Name: j.name, Type: j.typ, Payload: json.RawMessage(j.payload),
		MaxAttempts: int32(j.maxAttempts), BaseDelay: int32(j.baseDelay), MaxDelay: int32(j.maxDelay),
		ScheduledAt: j.scheduledAt, ExpiresAt: nullTime(j.expiresAt), CreatedAt: now,
		TableName: s.r.quoted, UniqueKey: k.key, HeldUntil: k.heldUntil,
	})
	if err != nil || len(ids) == 0 {
		return 0, false, err
	}
	if d.insertNotifies() {
		err = qs.NotifyTypes(ctx, pggen.NotifyTypesParams{Channel: s.channel(), Types: json.RawMessage(jsonList([]string{j.typ}))})
	}
	return ids[0], err == nil, err
}

func (s pgStore) keyHolder(ctx context.Context, d dbtx, key string, lock bool) (keyRow, bool, error) {
	qs := pggen.New(d)
	if lock {
		rows, err := qs.KeyHolderForUpdate(ctx, nullString(key))
		if err != nil || len(rows) == 0 {
			return keyRow{}, false, err
		}
		return keyRow{jobID: rows[0].JobID, heldUntil: engine.AsUTC(rows[0].HeldUntil)}, true, nil
	}
	rows, err := qs.KeyHolder(ctx, nullString(key))
	if err != nil || len(rows) == 0 {
		return keyRow{}, false, err
	}
	return keyRow{jobID: rows[0].JobID, heldUntil: engine.AsUTC(rows[0].HeldUntil)}, true, nil
}

func (s pgStore) holderStatus(ctx context.Context, d dbtx, id int64, lock bool) (Status, error) {
	qs := pggen.New(d)
	var st []string
	var err error
	if lock {
		st, err = qs.HolderStatusForShare(ctx, id)
	} else {
		st, err = qs.HolderStatus(ctx, id)
	}
	if err != nil || len(st) == 0 {
		return "", err
	}
	return Status(st[0]), nil
}

// readsLatest reports whether each statement in the transaction of d (a
// caller's) reads the latest committed rows: its isolation level is READ
// COMMITTED, or READ UNCOMMITTED, which PostgreSQL runs as READ COMMITTED.
func (s pgStore) readsLatest(ctx context.Context, d dbtx) (bool, error) {
	level, err := pggen.New(d).TransactionIsolation(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the isolation level of your transaction: %w", err)
	}
	return level == "read committed" || level == "read uncommitted", nil
}

func (s pgStore) freeKey(ctx context.Context, d dbtx, id int64) error {
	return pggen.New(d).FreeKey(ctx, id)
}

func (s pgStore) jobKey(ctx context.Context, d dbtx, id int64) (keyRow, bool, error) {
	rows, err := pggen.New(d).JobKeyForUpdate(ctx, id)
	if err != nil || len(rows) == 0 {
		return keyRow{}, false, err
	}
	r := rows[0]
	return keyRow{jobID: id, key: r.UniqueKey, live: r.LiveKey.Valid, heldUntil: engine.AsUTC(r.HeldUntil)}, true, nil
}

func (s pgStore) retakeKey(ctx context.Context, d dbtx, id int64) error {
	_, err := pggen.New(d).RetakeKey(ctx, id)
	return err
}

func (s pgStore) deleteKeys(ctx context.Context, ids []int64) error {
	return s.qs().DeleteKeys(ctx, json.RawMessage(jsonList(ids)))
}

func (s pgStore) keyWindow(ctx context.Context, d dbtx, after int64, max int) (int, int64, error) {
	w, err := pggen.New(d).KeyWindow(ctx, pggen.KeyWindowParams{After: after, MaxRows: int32(max)})
	return int(w.Seen), w.LastID, err
}

func (s pgStore) deleteOrphanKeys(ctx context.Context, d dbtx, after, last int64) (int64, error) {
	return pggen.New(d).DeleteOrphanKeys(ctx, pggen.DeleteOrphanKeysParams{After: after, LastID: last})
}

func (s pgStore) retryCandidate(ctx context.Context, d dbtx, id int64) (Status, *time.Time, bool, error) {
	r, found, err := firstOf(pggen.New(d).RetryCandidate(ctx, id))
	return Status(r.Status), timePtr(r.ExpiresAt), found, err
}

func (s pgStore) retryIn(ctx context.Context, d dbtx, id int64, w retryWrite, now time.Time) (bool, error) {
	n, err := pggen.New(d).RetryJob(ctx, pggen.RetryJobParams{Now: now, ExpiresAt: nullTime(w.expiresAt), ID: id, ReadStatus: string(w.from)})
	return n > 0, err
}

func (s pgStore) periodicLastTick(ctx context.Context, d dbtx, row string) (tickRecord, bool, error) {
	r, found, err := firstOf(pggen.New(d).PeriodicLastTick(ctx, row))
	return tickRecord{tick: r.Term, next: r.NextNanos}, found, err
}

func (s pgStore) periodicSetLastTick(ctx context.Context, d dbtx, row, periodic string, r tickRecord) error {
	return pggen.New(d).SetPeriodicLastTick(ctx, pggen.SetPeriodicLastTickParams{Name: row, Periodic: periodic, TickNanos: r.tick, NextNanos: r.next})
}
