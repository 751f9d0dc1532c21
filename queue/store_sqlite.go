package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"

	"github.com/jobqueue/jobqueue/db/sqlitegen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// sqliteStore runs the generated SQLite queries (db/sqlitegen). SQLite has
// one writer at a time: a write that finds the database busy (beyond the
// connection's busy_timeout) is retried a few times with a short backoff,
// then its error is returned.
type sqliteStore struct{ r *runner }

func (s sqliteStore) qs() *sqlitegen.Queries { return sqlitegen.New(s.r.on(nil)) }

// Busy retries: sqliteBusyTries attempts, waiting sqliteBusyWait, doubled
// after each.
const (
	sqliteBusyTries = 5
	sqliteBusyWait  = 5 * time.Millisecond
)

// isSQLiteBusy reports SQLITE_BUSY and SQLITE_LOCKED (any extended code).
func isSQLiteBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return true
	}
	return false
}

// busyRetry runs fn until it does not fail with a busy error, at most
// sqliteBusyTries times.
// busyRetryOn is busyRetry for a statement on d: on the pool it tries
// again; in a transaction (a leader's act) it runs once, since only the
// whole transaction can be run again (retryTx).
func busyRetryOn[T any](ctx context.Context, d dbtx, fn func() (T, error)) (T, error) {
	if d.tx != nil {
		return fn()
	}
	return busyRetry(ctx, fn)
}

// writeGated runs busyRetry(ctx, fn) once it holds s.r.writer, the queue's
// gate of its own attempt writes (claims, heartbeats, completions, ends) on
// the pool. SQLite lets one connection write at a time; without the gate a
// claim, a completion and a heartbeat of the same process, each on its own
// connection, find each other's write lock and sleep in SQLite's busy
// handler (a millisecond and more each time) while the lock is free again
// at once. With it they queue in the process and take the lock in turn;
// writers of other processes are still met by busy_timeout and busyRetry.
// The gate is held only for one statement (never across a caller's
// transaction), and waiting for it ends with ctx.
func writeGated[T any](ctx context.Context, s sqliteStore, fn func() (T, error)) (T, error) {
	select {
	case s.r.writer <- struct{}{}:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	defer func() { <-s.r.writer }()
	return busyRetry(ctx, fn)
}

func busyRetry[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	wait := sqliteBusyWait
	for try := 1; ; try++ {
		v, err := fn()
		if err == nil || !isSQLiteBusy(err) || try == sqliteBusyTries {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// checkpointWAL copies what it can of the WAL back into the database file
// (checkpoint.go): PRAGMA wal_checkpoint(PASSIVE), which waits for no
// reader or writer (one that meets another checkpoint reports it busy, no
// error). A PRAGMA names no table, so it goes to the pool as it is.
func (s sqliteStore) checkpointWAL(ctx context.Context) error {
	_, err := s.r.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
	return err
}

func (s sqliteStore) probe(ctx context.Context) error {
	_, err := s.qs().ProbeTable(ctx)
	return err
}

func (s sqliteStore) insert(ctx context.Context, d dbtx, j *newJob, now time.Time) (int64, error) {
	arg := sqlitegen.InsertJobParams{
		Name: j.name, Type: j.typ, Payload: string(j.payload),
		MaxAttempts: j.maxAttempts, BaseDelay: j.baseDelay, MaxDelay: j.maxDelay,
		ScheduledAt: j.scheduledAt, ExpiresAt: nullTime(j.expiresAt), CreatedAt: now,
	}
	if d.tx != nil { // a caller's transaction: retrying is the caller's call
		return sqlitegen.New(d).InsertJob(ctx, arg)
	}
	return busyRetry(ctx, func() (int64, error) { return sqlitegen.New(d).InsertJob(ctx, arg) })
}

func (s sqliteStore) insertMany(ctx context.Context, d dbtx, jobs []*newJob, now time.Time) error {
	chunks, err := jsonChunks(jobs, engine.SQLiteTimeFormat)
	if err != nil {
		return err
	}
	qs := sqlitegen.New(d)
	for _, c := range chunks {
		if _, err := qs.InsertJobsJSON(ctx, sqlitegen.InsertJobsJSONParams{CreatedAt: now, Rows: c}); err != nil {
			return err
		}
	}
	return nil
}

func (s sqliteStore) stats(ctx context.Context, typ string) (map[Status]int64, error) {
	if typ == "" {
		return countsByStatus(s.qs().CountByStatus(ctx))
	}
	return countsByStatus(s.qs().CountByStatusOfType(ctx, typ))
}

func (s sqliteStore) list(ctx context.Context, f ListFilter, beforeID int64, limit int) ([]*JobRow, error) {
	rows, err := s.qs().ListJobs(ctx, sqlitegen.ListJobsParams{
		BeforeID: beforeID, Status: nullable(string(f.Status)), Type: nullable(f.Type), Name: nullable(f.Name), MaxRows: int64(limit),
	})
	return jobRows(rows), err
}

func (s sqliteStore) listWindow(ctx context.Context, f ListFilter, floorID, beforeID int64, limit int) ([]*JobRow, error) {
	rows, err := s.qs().ListJobsWindow(ctx, sqlitegen.ListJobsWindowParams{
		BeforeID: beforeID, FloorID: floorID, Name: f.Name, Status: nullable(string(f.Status)), MaxRows: int64(limit),
	})
	return jobRows(rows), err
}

func (s sqliteStore) idBelow(ctx context.Context, beforeID int64) (int64, bool, error) {
	return firstOf(s.qs().JobIDBelow(ctx, beforeID))
}

func (s sqliteStore) get(ctx context.Context, id int64) (*JobRow, error) {
	r, found, err := firstOf(s.qs().GetJob(ctx, id))
	if !found {
		return nil, err
	}
	return jobRow(r), nil
}

func (s sqliteStore) expire(ctx context.Context, d dbtx, now time.Time, max int) (int64, error) {
	return busyRetryOn(ctx, d, func() (int64, error) {
		return sqlitegen.New(d).ExpireOverdue(ctx, sqlitegen.ExpireOverdueParams{Now: nullTime(&now), MaxRows: int64(max)})
	})
}

func (s sqliteStore) prune(ctx context.Context, d dbtx, cutoff time.Time, batch int) (int64, error) {
	return busyRetryOn(ctx, d, func() (int64, error) {
		return sqlitegen.New(d).PruneFinished(ctx, sqlitegen.PruneFinishedParams{Cutoff: nullTime(&cutoff), MaxRows: int64(batch)})
	})
}

func (s sqliteStore) analyze(ctx context.Context) error {
	return nil // SQLite plans with its index heuristics when no statistics exist
}

func (s sqliteStore) purge(ctx context.Context) (int64, error) {
	return busyRetry(ctx, func() (int64, error) { return s.qs().PurgeJobs(ctx) })
}

func (s sqliteStore) leaderFence(ctx context.Context, d dbtx, role, holder string, term int64, _ time.Duration) (bool, time.Time, error) {
	rows, err := sqlitegen.New(d).FenceLeaderAct(ctx, sqlitegen.FenceLeaderActParams{FenceName: fenceRowName(role), Holder: holder, Term: term, Name: role})
	if err != nil || len(rows) != 1 {
		return false, time.Time{}, err
	}
	now, err := sqliteServerTime(rows[0])
	return err == nil, now, err
}

func (s sqliteStore) leaderEnsure(ctx context.Context, role string) error {
	_, err := busyRetry(ctx, func() (struct{}, error) { return struct{}{}, s.qs().EnsureLeaderRow(ctx, role) })
	return err
}

func (s sqliteStore) leaderAcquire(ctx context.Context, role, holder string, lease time.Duration) (bool, error) {
	return busyRetry(ctx, func() (bool, error) { return acquireLeader(ctx, s, role, holder, lease) })
}

func (s sqliteStore) acquireLeaderOn(ctx context.Context, role, holder string, lease time.Duration) (bool, error) {
	n, err := s.qs().AcquireLeader(ctx, sqlitegen.AcquireLeaderParams{
		Holder: holder, LeaseModifier: fmt.Sprintf("%+.3f seconds", lease.Seconds()), Name: role,
	})
	return n == 1, err
}

func (s sqliteStore) leaderFenceBehind(ctx context.Context, role, holder string) (int64, bool, error) {
	return firstOf(s.qs().LeaderFenceBehind(ctx, sqlitegen.LeaderFenceBehindParams{Name: role, Holder: holder, FenceName: fenceRowName(role)}))
}

func (s sqliteStore) setLeaderFence(ctx context.Context, role, holder string, term int64) error {
	return s.qs().SetLeaderFence(ctx, sqlitegen.SetLeaderFenceParams{FenceName: fenceRowName(role), Holder: holder, Term: term})
}

func (s sqliteStore) leaderRelease(ctx context.Context, role, holder string) error {
	_, err := busyRetry(ctx, func() (int64, error) {
		return s.qs().ReleaseLeader(ctx, sqlitegen.ReleaseLeaderParams{Name: role, Holder: holder})
	})
	return err
}

// sqliteLeaderTime is the form of the times the leader queries write
// (strftime's %Y-%m-%d %H:%M:%f).
const sqliteLeaderTime = "2006-01-02 15:04:05.999"

func (s sqliteStore) leaderGet(ctx context.Context, role string) (*leaderRow, error) {
	r, err := s.qs().GetLeader(ctx, role)
	return leaderRowOf(r, err, sqliteServerTime)
}

// sqliteServerTime reads the time GetLeader returns as text
// (sqliteLeaderTime).
func sqliteServerTime(v any) (time.Time, error) {
	text, _ := v.(string)
	now, err := time.Parse(sqliteLeaderTime, text)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading SQLite's time %v: %w", v, err)
	}
	return now, nil
}

// nullable is s for a sqlc.narg parameter of the SQLite queries: nil (SQL
// NULL, "no filter") when s is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// cancel reads the jobs it ends (CancelCandidates: SQLite's RETURNING
// gives only the new values, and the lease each running attempt held
// decides who counts it) and ends them, in one transaction that holds the
// write lock from its start (connTx: BEGIN IMMEDIATE), so that no write
// comes between the two; a busy database runs it again as a whole
// (retryTx).
func (s sqliteStore) cancel(ctx context.Context, ids []int64, o attemptEnd) (map[int64]bool, map[int64]Status, []cancelledRun, error) {
	var done map[int64]bool
	var ran []cancelledRun
	err := retryTx(ctx, func() error {
		return s.r.connTx(ctx, func(d dbtx) error {
			qs := sqlitegen.New(d)
			rows, err := qs.CancelCandidates(ctx, jsonList(ids))
			if err != nil {
				return err
			}
			changed, err := qs.CancelJobs(ctx, sqlitegen.CancelJobsParams{
				Status: string(o.status), Error: nullString(o.errText), FinishedAt: nullTime(nullableTime(o.finishedAt)), Ids: jsonList(ids),
			})
			if err != nil {
				return err
			}
			if len(changed) != len(rows) {
				return fmt.Errorf("jobqueue: internal: cancel read %d jobs to end but ended %d", len(rows), len(changed))
			}
			done, ran = idSet(changed), nil
			for _, r := range rows {
				if Status(r.Status) == StatusInProgress {
					ran = append(ran, cancelledRun{typ: r.Type, lease: timePtr(r.LeaseUntil)})
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, nil, err
	}
	done, others, err := controlRest(ids, done, s.statuses(ctx))
	return done, others, ran, err
}

func (s sqliteStore) deleteJobs(ctx context.Context, ids []int64) (map[int64]bool, map[int64]Status, error) {
	done, err := busyRetry(ctx, func() ([]int64, error) { return s.qs().DeleteJobs(ctx, jsonList(ids)) })
	if err != nil {
		return nil, nil, err
	}
	return controlRest(ids, idSet(done), s.statuses(ctx))
}

// statuses is JobStatuses for controlRest.
func (s sqliteStore) statuses(ctx context.Context) func(ids string) ([]sqlitegen.JobStatusesRow, error) {
	return func(ids string) ([]sqlitegen.JobStatusesRow, error) { return s.qs().JobStatuses(ctx, ids) }
}

func (s sqliteStore) probeUnique(ctx context.Context, d dbtx) error {
	_, err := sqlitegen.New(d).ProbeUnique(ctx)
	return err
}

// insertUnique inserts the job, then its key row (d is a transaction);
// when another job holds the key it deletes the job again.
func (s sqliteStore) insertUnique(ctx context.Context, d dbtx, j *newJob, k uniqueKey, now time.Time) (int64, bool, error) {
	qs := sqlitegen.New(d)
	id, err := qs.InsertJob(ctx, sqlitegen.InsertJobParams{
		Name: j.name, Type: j.typ, Payload: string(j.payload),
		MaxAttempts: j.maxAttempts, BaseDelay: j.baseDelay, MaxDelay: j.maxDelay,
		ScheduledAt: j.scheduledAt, ExpiresAt: nullTime(j.expiresAt), CreatedAt: now,
	})
	if err != nil {
		return 0, false, err
	}
	takeBack := func(err error) error {
		return takeBackJob(ctx, id, err, func(ctx context.Context) error { return qs.DeleteJob(ctx, id) })
	}
	n, err := qs.InsertKey(ctx, sqlitegen.InsertKeyParams{JobID: id, UniqueKey: k.key, HeldUntil: k.heldUntil})
	if err != nil {
		return 0, false, takeBack(err)
	}
	if n == 1 {
		return id, true, nil
	}
	if err := qs.DeleteJob(ctx, id); err != nil {
		return 0, false, takeBack(err)
	}
	return 0, false, nil
}

func (s sqliteStore) keyHolder(ctx context.Context, d dbtx, key string, lock bool) (keyRow, bool, error) {
	rows, err := sqlitegen.New(d).KeyHolder(ctx, nullString(key))
	if err != nil || len(rows) == 0 {
		return keyRow{}, false, err
	}
	return keyRow{jobID: rows[0].JobID, heldUntil: engine.AsUTC(rows[0].HeldUntil)}, true, nil
}

func (s sqliteStore) holderStatus(ctx context.Context, d dbtx, id int64, lock bool) (Status, error) {
	st, err := sqlitegen.New(d).HolderStatus(ctx, id)
	if err != nil || len(st) == 0 {
		return "", err
	}
	return Status(st[0]), nil
}

func (s sqliteStore) freeKey(ctx context.Context, d dbtx, id int64) error {
	return sqlitegen.New(d).FreeKey(ctx, id)
}

func (s sqliteStore) jobKey(ctx context.Context, d dbtx, id int64) (keyRow, bool, error) {
	rows, err := sqlitegen.New(d).JobKey(ctx, id)
	if err != nil || len(rows) == 0 {
		return keyRow{}, false, err
	}
	r := rows[0]
	return keyRow{jobID: id, key: r.UniqueKey, live: r.LiveKey.Valid, heldUntil: engine.AsUTC(r.HeldUntil)}, true, nil
}

func (s sqliteStore) retakeKey(ctx context.Context, d dbtx, id int64) error {
	_, err := sqlitegen.New(d).RetakeKey(ctx, id)
	return err
}

func (s sqliteStore) deleteKeys(ctx context.Context, ids []int64) error {
	_, err := busyRetry(ctx, func() (struct{}, error) { return struct{}{}, s.qs().DeleteKeys(ctx, jsonList(ids)) })
	return err
}

func (s sqliteStore) keyWindow(ctx context.Context, d dbtx, after int64, max int) (int, int64, error) {
	w, err := busyRetryOn(ctx, d, func() (sqlitegen.KeyWindowRow, error) {
		return sqlitegen.New(d).KeyWindow(ctx, sqlitegen.KeyWindowParams{After: after, MaxRows: int64(max)})
	})
	return int(w.Seen), w.LastID, err
}

func (s sqliteStore) deleteOrphanKeys(ctx context.Context, d dbtx, after, last int64) (int64, error) {
	return busyRetryOn(ctx, d, func() (int64, error) {
		return sqlitegen.New(d).DeleteOrphanKeys(ctx, sqlitegen.DeleteOrphanKeysParams{After: after, LastID: last})
	})
}

func (s sqliteStore) retryCandidate(ctx context.Context, d dbtx, id int64) (Status, *time.Time, bool, error) {
	r, found, err := firstOf(sqlitegen.New(d).RetryCandidate(ctx, id))
	return Status(r.Status), timePtr(r.ExpiresAt), found, err
}

func (s sqliteStore) retryIn(ctx context.Context, d dbtx, id int64, w retryWrite, now time.Time) (bool, error) {
	n, err := sqlitegen.New(d).RetryJob(ctx, sqlitegen.RetryJobParams{Now: now, ExpiresAt: nullTime(w.expiresAt), ID: id, ReadStatus: string(w.from)})
	return n > 0, err
}

func (s sqliteStore) periodicLastTick(ctx context.Context, d dbtx, row string) (tickRecord, bool, error) {
	r, found, err := firstOf(sqlitegen.New(d).PeriodicLastTick(ctx, row))
	return tickRecord{tick: r.Term, next: r.NextNanos}, found, err
}

func (s sqliteStore) periodicSetLastTick(ctx context.Context, d dbtx, row, periodic string, r tickRecord) error {
	return sqlitegen.New(d).SetPeriodicLastTick(ctx, sqlitegen.SetPeriodicLastTickParams{Name: row, Periodic: periodic, TickNanos: r.tick, NextNanos: r.next})
}
