package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// mysqlStore runs the generated MySQL/MariaDB queries (db/mysqlgen). MySQL
// 8.0 has no UPDATE … RETURNING, so a claim is a short READ COMMITTED
// transaction (SELECT … FOR UPDATE SKIP LOCKED, then UPDATE), and batched
// completions lock the rows they still hold before changing them, to know
// which attempts were stale. IN lists are padded to a power of two (padIDs)
// so that each statement has few texts, each prepared once per connection.
type mysqlStore struct{ r *runner }

func (s mysqlStore) qs() *mysqlgen.Queries { return mysqlgen.New(s.r.on(nil)) }

// maxPlaceholders is MySQL's limit of placeholders in one statement.
const maxPlaceholders = 65535

func (s mysqlStore) probe(ctx context.Context) error {
	if _, err := s.qs().ProbeTable(ctx); err != nil {
		return err
	}
	if _, err := s.qs().ProbeTime(ctx, time.Unix(0, 0)); err != nil {
		if strings.Contains(err.Error(), "unsupported Scan") {
			return errors.New("jobqueue: the MySQL connection returns DATETIME values as bytes; add parseTime=true to the DSN (for example user:pass@tcp(host:3306)/db?parseTime=true), or open it with jobqueue's mysql:// URL")
		}
		return err
	}
	return nil
}

func (s mysqlStore) insertParams(j *newJob, now time.Time) mysqlgen.InsertJobParams {
	return mysqlgen.InsertJobParams{
		Name: j.name, Type: j.typ, Payload: j.payload,
		MaxAttempts: uint32(j.maxAttempts), BaseDelay: uint32(j.baseDelay), MaxDelay: uint32(j.maxDelay),
		ScheduledAt: j.scheduledAt, ExpiresAt: nullTime(j.expiresAt), CreatedAt: now,
	}
}

func (s mysqlStore) insert(ctx context.Context, d dbtx, j *newJob, now time.Time) (int64, error) {
	return mysqlgen.New(d).InsertJob(ctx, s.insertParams(j, now))
}

// insertMany runs the generated single-row InsertJob through a recorder, to
// take its text and arguments, and sends multi-row versions of it (sqlc's
// MySQL parser has no JSON_TABLE, so this keeps sqlc the source of the SQL).
func (s mysqlStore) insertMany(ctx context.Context, d dbtx, jobs []*newJob, now time.Time) error {
	var rec recorder
	rq := mysqlgen.New(&rec)
	var text string
	var args []any
	rows, bytes, perRow := 0, 0, 0
	flush := func() error {
		if rows == 0 {
			return nil
		}
		q, err := expandValues(text, rows)
		if err != nil {
			return err
		}
		if _, err := d.execOnce(ctx, q, args...); err != nil {
			return err
		}
		args, rows, bytes = args[:0], 0, 0
		return nil
	}
	for _, j := range jobs {
		if _, err := rq.InsertJob(ctx, s.insertParams(j, now)); err != nil {
			return err
		}
		if text == "" {
			var err error
			if text, err = d.r.text(rec.query); err != nil {
				return err
			}
			perRow = len(rec.args)
		}
		if rows > 0 && ((rows+1)*perRow > maxPlaceholders || bytes+len(j.payload) > maxChunkBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		args = append(args, rec.args...)
		rows++
		bytes += len(j.payload) + len(j.name) + len(j.typ)
	}
	return flush()
}

func mysqlTokens(toks []string) []sql.NullString {
	out := make([]sql.NullString, len(toks))
	for i, t := range toks {
		out[i] = nullString(t)
	}
	return out
}

func uids(ids []int64) []uint64 {
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = uint64(id)
	}
	return out
}

func (s mysqlStore) stats(ctx context.Context, typ string) (map[Status]int64, error) {
	if typ == "" {
		return countsByStatus(s.qs().CountByStatus(ctx))
	}
	return countsByStatus(s.qs().CountByStatusOfType(ctx, typ))
}

func (s mysqlStore) list(ctx context.Context, f ListFilter, beforeID int64, limit int) ([]*JobRow, error) {
	rows, err := s.qs().ListJobs(ctx, mysqlgen.ListJobsParams{
		BeforeID: uint64(beforeID),
		Status:   mysqlgen.NullJobsStatus{JobsStatus: mysqlgen.JobsStatus(f.Status), Valid: f.Status != ""},
		Type:     nullString(f.Type), Name: nullString(f.Name), Limit: int32(limit),
	})
	return jobRows(rows), err
}

func (s mysqlStore) listWindow(ctx context.Context, f ListFilter, floorID, beforeID int64, limit int) ([]*JobRow, error) {
	rows, err := s.qs().ListJobsWindow(ctx, mysqlgen.ListJobsWindowParams{
		BeforeID: uint64(beforeID), FloorID: uint64(floorID), Name: f.Name,
		Status: mysqlgen.NullJobsStatus{JobsStatus: mysqlgen.JobsStatus(f.Status), Valid: f.Status != ""},
		Limit:  int32(limit),
	})
	return jobRows(rows), err
}

func (s mysqlStore) idBelow(ctx context.Context, beforeID int64) (int64, bool, error) {
	id, found, err := firstOf(s.qs().JobIDBelow(ctx, uint64(beforeID)))
	return int64(id), found, err
}

func (s mysqlStore) get(ctx context.Context, id int64) (*JobRow, error) {
	if id <= 0 {
		return nil, nil
	}
	r, found, err := firstOf(s.qs().GetJob(ctx, uint64(id)))
	if !found {
		return nil, err
	}
	return jobRow(r), nil
}

// readCommitted runs one statement in a short READ COMMITTED transaction,
// whatever the session's level. ExpireOverdue, Reclaim and Prune scan
// ranges of an index; at REPEATABLE READ (MySQL's default) the scan takes
// gap locks, and ExpireOverdue's cover the place where every new job
// without a deadline is inserted, so enqueues would wait for it (and fail
// with a lock wait timeout when it waits on a row itself).
// On d, the transaction of a leader's act (READ COMMITTED too,
// leaderAct), it runs the statement there.
func (s mysqlStore) readCommitted(ctx context.Context, d dbtx, fn func(qs *mysqlgen.Queries) (int64, error)) (int64, error) {
	if d.tx != nil {
		return fn(mysqlgen.New(d))
	}
	tx, err := s.r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	n, err := fn(mysqlgen.New(s.r.on(tx)))
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

func (s mysqlStore) expire(ctx context.Context, d dbtx, now time.Time, max int) (int64, error) {
	return s.readCommitted(ctx, d, func(qs *mysqlgen.Queries) (int64, error) {
		return qs.ExpireOverdue(ctx, mysqlgen.ExpireOverdueParams{Now: nullTime(&now), Limit: int32(max)})
	})
}

func (s mysqlStore) prune(ctx context.Context, d dbtx, cutoff time.Time, batch int) (int64, error) {
	return s.readCommitted(ctx, d, func(qs *mysqlgen.Queries) (int64, error) {
		return qs.PruneFinished(ctx, mysqlgen.PruneFinishedParams{Cutoff: nullTime(&cutoff), Limit: int32(batch)})
	})
}

func (s mysqlStore) analyze(ctx context.Context) error {
	return nil // InnoDB estimates ranges with index dives; its statistics recalculate by themselves
}

func (s mysqlStore) purge(ctx context.Context) (int64, error) {
	return s.qs().PurgeJobs(ctx)
}

func (s mysqlStore) leaderFence(ctx context.Context, d dbtx, role, holder string, term int64, _ time.Duration) (bool, time.Time, error) {
	qs := mysqlgen.New(d)
	n, err := qs.FenceLeaderAct(ctx, mysqlgen.FenceLeaderActParams{FenceName: fenceRowName(role), Holder: holder, Term: term})
	if err != nil || n != 1 {
		return false, time.Time{}, err
	}
	held, err := qs.LeaderLeaseHeld(ctx, mysqlgen.LeaderLeaseHeldParams{Name: role, Holder: holder, Term: term})
	if err != nil {
		return false, time.Time{}, err
	}
	return held.Held == 1, engine.AsUTC(held.DbNow), nil
}

func (s mysqlStore) leaderEnsure(ctx context.Context, role string) error {
	return s.qs().EnsureLeaderRow(ctx, role)
}

func (s mysqlStore) leaderAcquire(ctx context.Context, role, holder string, lease time.Duration) (bool, error) {
	return acquireLeader(ctx, s, role, holder, lease)
}

func (s mysqlStore) acquireLeaderOn(ctx context.Context, role, holder string, lease time.Duration) (bool, error) {
	n, err := s.qs().AcquireLeader(ctx, mysqlgen.AcquireLeaderParams{Holder: holder, LeaseMicros: int32(lease.Microseconds()), Name: role})
	return n == 1, err
}

func (s mysqlStore) leaderFenceBehind(ctx context.Context, role, holder string) (int64, bool, error) {
	return firstOf(s.qs().LeaderFenceBehind(ctx, mysqlgen.LeaderFenceBehindParams{Name: role, Holder: holder, FenceName: fenceRowName(role)}))
}

func (s mysqlStore) setLeaderFence(ctx context.Context, role, holder string, term int64) error {
	return s.qs().SetLeaderFence(ctx, mysqlgen.SetLeaderFenceParams{FenceName: fenceRowName(role), Holder: holder, Term: term})
}

func (s mysqlStore) leaderRelease(ctx context.Context, role, holder string) error {
	_, err := s.qs().ReleaseLeader(ctx, mysqlgen.ReleaseLeaderParams{Name: role, Holder: holder})
	return err
}

func (s mysqlStore) leaderGet(ctx context.Context, role string) (*leaderRow, error) {
	r, err := s.qs().GetLeader(ctx, role)
	return leaderRowOf(r, err, serverTime)
}

// control runs one control statement in a short READ COMMITTED
// transaction: it locks the rows of ids and reads them, lets pick choose
// the ids to change (by status) and change them, and commits. A deadlock
// with a heartbeat or completion of the same rows runs it again (retryTx),
// after start (which forgets what pick kept of the try before).
func (s mysqlStore) control(ctx context.Context, ids []int64, start func(), pick func(mysqlgen.LockJobStatusesRow) bool, change func(qs *mysqlgen.Queries, ids []uint64) (int64, error)) (done map[int64]bool, others map[int64]Status, err error) {
	err = retryTx(ctx, func() error {
		start()
		var err error
		done, others, err = s.controlOnce(ctx, ids, pick, change)
		return err
	})
	return done, others, err
}

// controlOnce is one try of control.
func (s mysqlStore) controlOnce(ctx context.Context, ids []int64, pick func(mysqlgen.LockJobStatusesRow) bool, change func(qs *mysqlgen.Queries, ids []uint64) (int64, error)) (map[int64]bool, map[int64]Status, error) {
	tx, err := s.r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	qs := mysqlgen.New(s.r.on(tx))
	rows, err := qs.LockJobStatuses(ctx, padIDs(uids(ids)))
	if err != nil {
		return nil, nil, err
	}
	done := map[int64]bool{}
	others := map[int64]Status{}
	var pickIDs []uint64
	for _, r := range rows {
		if st := Status(r.Status); pick(r) {
			done[int64(r.ID)] = true
			pickIDs = append(pickIDs, r.ID)
		} else {
			others[int64(r.ID)] = st
		}
	}
	if len(pickIDs) == 0 {
		return done, others, nil
	}
	n, err := change(qs, padIDs(pickIDs))
	if err != nil {
		return nil, nil, err
	}
	if n != int64(len(pickIDs)) {
		return nil, nil, fmt.Errorf("jobqueue: %d of the %d locked jobs changed; nothing was changed", n, len(pickIDs))
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, err
	}
	return done, others, nil
}

// cancel takes the lease of each running attempt it ends from the rows
// control locked (LockJobStatuses), which nothing changes before the
// UPDATE in the same transaction.
func (s mysqlStore) cancel(ctx context.Context, ids []int64, o attemptEnd) (map[int64]bool, map[int64]Status, []cancelledRun, error) {
	var ran []cancelledRun
	done, others, err := s.control(ctx, ids, func() { ran = nil }, func(r mysqlgen.LockJobStatusesRow) bool {
		st := Status(r.Status)
		if st == StatusInProgress {
			ran = append(ran, cancelledRun{typ: r.Type, lease: timePtr(r.LeaseUntil)})
		}
		return st == StatusPending || st == StatusInProgress
	}, func(qs *mysqlgen.Queries, ids []uint64) (int64, error) {
		return qs.CancelJobs(ctx, mysqlgen.CancelJobsParams{
			Status: mysqlgen.JobsStatus(o.status), Error: nullString(o.errText), FinishedAt: nullTime(nullableTime(o.finishedAt)), Ids: ids,
		})
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return done, others, ran, nil
}

func (s mysqlStore) deleteJobs(ctx context.Context, ids []int64) (map[int64]bool, map[int64]Status, error) {
	return s.control(ctx, ids, func() {}, func(r mysqlgen.LockJobStatusesRow) bool { return Status(r.Status) != StatusInProgress },
		func(qs *mysqlgen.Queries, ids []uint64) (int64, error) { return qs.DeleteJobs(ctx, ids) })
}

func (s mysqlStore) probeUnique(ctx context.Context, d dbtx) error {
	_, err := mysqlgen.New(d).ProbeUnique(ctx)
	return err
}

// insertUnique inserts the job, then its key row (d is a transaction);
// when another job holds the key it deletes the job again.
func (s mysqlStore) insertUnique(ctx context.Context, d dbtx, j *newJob, k uniqueKey, now time.Time) (int64, bool, error) {
	qs := mysqlgen.New(d)
	id, err := qs.InsertJob(ctx, s.insertParams(j, now))
	if err != nil {
		return 0, false, err
	}
	takeBack := func(err error) error {
		return takeBackJob(ctx, id, err, func(ctx context.Context) error { return qs.DeleteJob(ctx, uint64(id)) })
	}
	res, err := qs.InsertKey(ctx, mysqlgen.InsertKeyParams{JobID: uint64(id), UniqueKey: k.key, LiveKey: nullString(k.key), HeldUntil: k.heldUntil})
	if err != nil {
		return 0, false, takeBack(err)
	}
	// The holder's job_id when another job holds the key, 0 when the key
	// row was inserted (see InsertKey).
	holder, err := res.LastInsertId()
	if err != nil {
		return 0, false, takeBack(err)
	}
	if holder == 0 {
		return id, true, nil
	}
	if err := qs.DeleteJob(ctx, uint64(id)); err != nil {
		return 0, false, takeBack(err)
	}
	return 0, false, nil
}

// keyHolder always locks: a locking read sees the latest committed row
// whatever the transaction's snapshot (REPEATABLE READ in a caller's).
func (s mysqlStore) keyHolder(ctx context.Context, d dbtx, key string, lock bool) (keyRow, bool, error) {
	rows, err := mysqlgen.New(d).KeyHolderForUpdate(ctx, nullString(key))
	if err != nil || len(rows) == 0 {
		return keyRow{}, false, err
	}
	return keyRow{jobID: int64(rows[0].JobID), heldUntil: engine.AsUTC(rows[0].HeldUntil)}, true, nil
}

func (s mysqlStore) holderStatus(ctx context.Context, d dbtx, id int64, lock bool) (Status, error) {
	qs := mysqlgen.New(d)
	var st []mysqlgen.JobsStatus
	var err error
	if lock {
		st, err = qs.HolderStatusForUpdate(ctx, uint64(id))
	} else {
		st, err = qs.HolderStatus(ctx, uint64(id))
	}
	if err != nil || len(st) == 0 {
		return "", err
	}
	return Status(st[0]), nil
}

func (s mysqlStore) freeKey(ctx context.Context, d dbtx, id int64) error {
	return mysqlgen.New(d).FreeKey(ctx, uint64(id))
}

func (s mysqlStore) jobKey(ctx context.Context, d dbtx, id int64) (keyRow, bool, error) {
	rows, err := mysqlgen.New(d).JobKeyForUpdate(ctx, uint64(id))
	if err != nil || len(rows) == 0 {
		return keyRow{}, false, err
	}
	r := rows[0]
	return keyRow{jobID: id, key: r.UniqueKey, live: r.LiveKey.Valid, heldUntil: engine.AsUTC(r.HeldUntil)}, true, nil
}

func (s mysqlStore) retakeKey(ctx context.Context, d dbtx, id int64) error {
	_, err := mysqlgen.New(d).RetakeKey(ctx, uint64(id))
	return err
}

func (s mysqlStore) deleteKeys(ctx context.Context, ids []int64) error {
	return s.qs().DeleteKeys(ctx, padIDs(uids(ids)))
}

func (s mysqlStore) keyWindow(ctx context.Context, d dbtx, after int64, max int) (int, int64, error) {
	w, err := mysqlgen.New(d).KeyWindow(ctx, mysqlgen.KeyWindowParams{After: uint64(after), Limit: int32(max)})
	return int(w.Seen), w.LastID, err
}

func (s mysqlStore) deleteOrphanKeys(ctx context.Context, d dbtx, after, last int64) (int64, error) {
	return s.readCommitted(ctx, d, func(qs *mysqlgen.Queries) (int64, error) {
		return qs.DeleteOrphanKeys(ctx, mysqlgen.DeleteOrphanKeysParams{After: uint64(after), LastID: uint64(last)})
	})
}

func (s mysqlStore) retryCandidate(ctx context.Context, d dbtx, id int64) (Status, *time.Time, bool, error) {
	if id <= 0 {
		return "", nil, false, nil
	}
	r, found, err := firstOf(mysqlgen.New(d).RetryCandidate(ctx, uint64(id)))
	return Status(r.Status), timePtr(r.ExpiresAt), found, err
}

func (s mysqlStore) retryIn(ctx context.Context, d dbtx, id int64, w retryWrite, now time.Time) (bool, error) {
	n, err := mysqlgen.New(d).RetryJob(ctx, mysqlgen.RetryJobParams{
		Now: now, ExpiresAt: nullTime(w.expiresAt), ID: uint64(id), ReadStatus: mysqlgen.JobsStatus(w.from),
	})
	return n > 0, err
}

func (s mysqlStore) periodicLastTick(ctx context.Context, d dbtx, row string) (tickRecord, bool, error) {
	r, found, err := firstOf(mysqlgen.New(d).PeriodicLastTick(ctx, row))
	return tickRecord{tick: r.Term, next: r.NextNanos}, found, err
}

func (s mysqlStore) periodicSetLastTick(ctx context.Context, d dbtx, row, periodic string, r tickRecord) error {
	return mysqlgen.New(d).SetPeriodicLastTick(ctx, mysqlgen.SetPeriodicLastTickParams{Name: row, Periodic: periodic, TickNanos: r.tick, NextNanos: r.next})
}
