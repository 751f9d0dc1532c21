-- Queries of the queue on MySQL 8.0+ / MariaDB 10.6+. They name the table
-- `jobs`; the queue sends them to the table chosen at run time
-- (queue/dbtx.go rewrites the identifier). Every time is passed from Go (the
-- queue's UTC clock) as a whole-second UTC string. MySQL 8.0 has no
-- RETURNING (MariaDB has, for DELETE and INSERT only), so nothing here uses
-- it; lists are sqlc.slice parameters.

-- name: ProbeTable :many
-- ProbeTable names every version 2 column, so that a missing table or an
-- outdated one fails here.
SELECT id, name, type, payload, status, attempts, claim_token, lease_until,
       max_attempts, base_delay, max_delay, error, scheduled_at, expires_at,
       finished_at, created_at
FROM jobs
LIMIT 0;

-- name: ProbeTime :one
-- ProbeTime returns a DATETIME, which go-sql-driver/mysql turns into a
-- time only when the DSN has parseTime=true (else it is bytes).
-- It names no table, and says so to the table rewriting.
SELECT /* jobqueue:no-table */ CAST(sqlc.arg(probe) AS DATETIME) AS probe_time;

-- name: InsertJob :execlastid
INSERT INTO jobs (name, type, payload, status, attempts, max_attempts, base_delay,
                  max_delay, scheduled_at, expires_at, created_at)
VALUES (?, ?, ?, 'pending', 0, ?, ?, ?, ?, ?, ?);

-- name: SelectDueJobs :many
-- SelectDueJobs locks due jobs of every type for a claim (index
-- status_scheduled), skipping rows other claims hold. It and its variants
-- start after (sqlc.arg(after_at), sqlc.arg(after_id)) in (scheduled_at, id)
-- order: a claimer's watermark (queue/claim_cursor.go), or the year 1 and
-- id 0 to scan from the start. With the queue's time arguments (whole-second
-- strings, engine.Kind.TimeArg) MariaDB reads it as a range of
-- status_scheduled that starts at the watermark (EXPLAIN: range, key parts
-- status, scheduled_at, id); a time.Time argument with nanoseconds turns
-- the plan into ref access on status from the start of the pending range.
SELECT * FROM jobs
WHERE status = 'pending' AND scheduled_at <= sqlc.arg(now)
  AND (scheduled_at > sqlc.arg(after_at) OR (scheduled_at = sqlc.arg(after_at) AND id > sqlc.arg(after_id)))
  AND (expires_at IS NULL OR expires_at > sqlc.arg(deadline_after))
ORDER BY scheduled_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: SelectDueJobsOfType :many
-- SelectDueJobsOfType is SelectDueJobs for one type (index type_status_scheduled).
SELECT * FROM jobs
WHERE type = sqlc.arg(type) AND status = 'pending' AND scheduled_at <= sqlc.arg(now)
  AND (scheduled_at > sqlc.arg(after_at) OR (scheduled_at = sqlc.arg(after_at) AND id > sqlc.arg(after_id)))
  AND (expires_at IS NULL OR expires_at > sqlc.arg(deadline_after))
ORDER BY scheduled_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: SelectDueJobsOfTypes :many
-- SelectDueJobsOfTypes is SelectDueJobs for several types.
SELECT * FROM jobs
WHERE type IN (sqlc.slice(types)) AND status = 'pending' AND scheduled_at <= sqlc.arg(now)
  AND (scheduled_at > sqlc.arg(after_at) OR (scheduled_at = sqlc.arg(after_at) AND id > sqlc.arg(after_id)))
  AND (expires_at IS NULL OR expires_at > sqlc.arg(deadline_after))
ORDER BY scheduled_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: TakeClaimMutex :one
-- TakeClaimMutex takes the table's claim mutex, a user lock of the session
-- (GET_LOCK) named after the database and the table (sqlc.arg(table_name)),
-- waiting up to sqlc.arg(wait_seconds): 1 when taken, 0 when the wait ran
-- out. A claim holds it from before its locking SELECT to after its COMMIT
-- (queue/store_mysql_claim.go). It names no table, and says so to the table
-- rewriting.
SELECT /* jobqueue:no-table */ CAST(COALESCE(GET_LOCK(
    CONCAT('jobqueue claims ', SHA1(CONCAT(DATABASE(), '.', CAST(sqlc.arg(table_name) AS CHAR)))),
    sqlc.arg(wait_seconds)), 0) AS SIGNED) AS taken;

-- name: ReleaseClaimMutex :one
-- ReleaseClaimMutex gives the claim mutex of TakeClaimMutex back: 1 when
-- this session held it.
SELECT /* jobqueue:no-table */ CAST(COALESCE(RELEASE_LOCK(
    CONCAT('jobqueue claims ', SHA1(CONCAT(DATABASE(), '.', CAST(sqlc.arg(table_name) AS CHAR))))), 0) AS SIGNED) AS released;

-- name: SelectClaimFrontier :one
-- SelectClaimFrontier is the claim order's place of the newest job in
-- progress: where the claims of a busy table have reached. A claim that
-- holds the claim mutex starts past it (and past its own watermark), so
-- that it does not pass over the entries of the batches other claimers
-- claimed since its last claim (queue/store_mysql_claim.go). One
-- descent of index status_scheduled from its end.
SELECT scheduled_at, id FROM jobs
WHERE status = 'in_progress'
ORDER BY scheduled_at DESC, id DESC
LIMIT 1;

-- name: SelectClaimFrontierOfType :one
-- SelectClaimFrontierOfType is SelectClaimFrontier for one type (index
-- type_status_scheduled).
SELECT scheduled_at, id FROM jobs
WHERE type = ? AND status = 'in_progress'
ORDER BY scheduled_at DESC, id DESC
LIMIT 1;

-- The claim (MarkClaimed) writes the claim token of the attempt it starts,
-- attemptToken(batch token, id) of queue/attempt.go, spelled here as
-- CONCAT(sqlc.arg(token), '-', id) (TestClaimTokenFormat checks it against
-- the Go function).

-- name: MarkClaimed :execrows
-- MarkClaimed marks the locked jobs in_progress, each with its attempt's
-- claim token.
UPDATE jobs
SET status = 'in_progress', attempts = attempts + 1,
    claim_token = CONCAT(sqlc.arg(token), '-', id), lease_until = sqlc.arg(lease_until)
WHERE id IN (sqlc.slice(ids)) AND status = 'pending';

-- name: ExtendLeases :execrows
UPDATE jobs
SET lease_until = sqlc.arg(lease_until)
WHERE id IN (sqlc.slice(ids)) AND claim_token IN (sqlc.slice(tokens))
  AND status = 'in_progress';

-- name: SelectTokens :many
-- SelectTokens reads the current tokens of jobs (to tell which attempts lost
-- their job).
SELECT id, claim_token FROM jobs WHERE id IN (sqlc.slice(ids));

-- name: LockHeldJobs :many
-- LockHeldJobs locks the jobs that the given attempts still hold, inside the
-- transaction that completes them.
SELECT id FROM jobs
WHERE id IN (sqlc.slice(ids)) AND claim_token IN (sqlc.slice(tokens))
  AND status = 'in_progress'
FOR UPDATE;

-- name: LockHeldJobsSkipLocked :many
-- LockHeldJobsSkipLocked is LockHeldJobs leaving alone the rows another
-- transaction holds locked: a completion written again after a write of it
-- waited on a lock (queue/store_mysql_attempts.go) completes the others.
SELECT id FROM jobs
WHERE id IN (sqlc.slice(ids)) AND claim_token IN (sqlc.slice(tokens))
  AND status = 'in_progress'
FOR UPDATE SKIP LOCKED;

-- name: CompleteJobs :execrows
UPDATE jobs
SET status = 'completed', finished_at = sqlc.arg(now), claim_token = NULL, lease_until = NULL
WHERE id IN (sqlc.slice(ids)) AND claim_token IN (sqlc.slice(tokens))
  AND status = 'in_progress';

-- name: DeleteCompletedJobs :execrows
DELETE FROM jobs
WHERE id IN (sqlc.slice(ids)) AND claim_token IN (sqlc.slice(tokens))
  AND status = 'in_progress';

-- name: SelectHeldAttempts :many
-- SelectHeldAttempts reads the jobs that the given attempts still hold.
--
-- The end of an attempt that did not succeed (handler failure, release at
-- shutdown, reclaim of an abandoned attempt) is decided in Go, by one rule
-- (queue/outcome.go). These statements only read the attempts the rule
-- needs (SelectHeldAttempts, SelectAbandoned: bounded) and write what it
-- decided (EndAttempts, EndAbandonedAttempts, FailJob), fenced by
-- claim_token. sqlc.narg(retry_at) is when the job runs again, or NULL to
-- leave scheduled_at as it is (MySQL applies assignments from left to right;
-- COALESCE reads scheduled_at before it is assigned).
SELECT * FROM jobs
WHERE id IN (sqlc.slice(ids)) AND claim_token IN (sqlc.slice(tokens))
  AND status = 'in_progress';

-- name: SelectAbandoned :many
-- SelectAbandoned reads at most a batch of abandoned attempts (in_progress,
-- lease passed; index lease_until).
SELECT * FROM jobs
WHERE lease_until < sqlc.arg(now) AND status = 'in_progress'
ORDER BY lease_until, id
LIMIT ?;

-- name: EndAttempts :execrows
-- EndAttempts writes one decided end to the given attempts; run after
-- LockHeldJobs in one transaction when some attempts may be stale.
UPDATE jobs
SET status = sqlc.arg(status), error = sqlc.arg(error),
    scheduled_at = COALESCE(sqlc.narg(retry_at), scheduled_at),
    finished_at = sqlc.narg(finished_at), claim_token = NULL, lease_until = NULL
WHERE id IN (sqlc.slice(ids)) AND claim_token IN (sqlc.slice(tokens))
  AND status = 'in_progress';

-- name: UnclaimJobs :execrows
-- UnclaimJobs gives back attempts that were claimed but never started (a
-- worker's buffered jobs that the shutdown cut off before an executor
-- took them, queue/shutdown.go): each job is pending again as it was
-- before its claim, its attempt not counted, its scheduled_at and error
-- kept.
UPDATE jobs
SET status = 'pending', attempts = attempts - 1, claim_token = NULL, lease_until = NULL
WHERE id IN (sqlc.slice(ids)) AND claim_token IN (sqlc.slice(tokens))
  AND status = 'in_progress';

-- name: EndAbandonedAttempts :execrows
-- EndAbandonedAttempts is EndAttempts for reclaimed attempts: only those
-- whose lease is still passed (a heartbeat may have come in between).
-- With untokened set, a NULL claim_token matches too: an in_progress job
-- that no attempt names (written by hand or by another client) is
-- abandoned as well once its lease passed, and Queue.Reclaim ends each
-- such job on its own.
UPDATE jobs
SET status = sqlc.arg(status), error = sqlc.arg(error),
    scheduled_at = COALESCE(sqlc.narg(retry_at), scheduled_at),
    finished_at = sqlc.narg(finished_at), claim_token = NULL, lease_until = NULL
WHERE id IN (sqlc.slice(ids))
  AND (claim_token IN (sqlc.slice(tokens)) OR (claim_token IS NULL AND sqlc.arg(untokened) = 1))
  AND status = 'in_progress' AND lease_until < sqlc.arg(now);

-- name: FailJob :execrows
-- FailJob records one failed attempt as the queue decided.
UPDATE jobs
SET status = sqlc.arg(status), error = sqlc.arg(error),
    scheduled_at = COALESCE(sqlc.narg(retry_at), scheduled_at),
    finished_at = sqlc.narg(finished_at), claim_token = NULL, lease_until = NULL
WHERE id = sqlc.arg(id) AND claim_token = sqlc.arg(token) AND status = 'in_progress';

-- name: CountByStatus :many
SELECT status, count(*) AS n FROM jobs GROUP BY status;

-- name: CountByStatusOfType :many
SELECT status, count(*) AS n FROM jobs WHERE type = ? GROUP BY status;

-- name: ListJobs :many
-- ListJobs pages newest first on the primary key: the jobs with ids below
-- before_id (the last id of the previous page, or the largest id for the
-- first), so every page is one backward range scan, never an OFFSET.
SELECT * FROM jobs
WHERE id < sqlc.arg(before_id)
  AND (sqlc.narg(status) IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(type) IS NULL OR type = sqlc.narg(type))
  AND (sqlc.narg(name) IS NULL OR name = sqlc.narg(name))
ORDER BY id DESC
LIMIT ?;

-- name: ListJobsWindow :many
-- ListJobsWindow is ListJobs for a kind (and a status) within a window of
-- ids, floor_id <= id < before_id: no index holds the kind, so the page
-- is a backward range scan of the primary key that examines at most the
-- window's ids (Queue.ListPage).
SELECT * FROM jobs
WHERE id < sqlc.arg(before_id) AND id >= sqlc.arg(floor_id)
  AND name = sqlc.arg(name)
  AND (sqlc.narg(status) IS NULL OR status = sqlc.narg(status))
ORDER BY id DESC
LIMIT ?;

-- name: JobIDBelow :many
-- JobIDBelow is the largest id below before_id, if any: one step of the
-- primary key.
SELECT id FROM jobs WHERE id < sqlc.arg(before_id) ORDER BY id DESC LIMIT 1;

-- name: GetJob :many
SELECT * FROM jobs WHERE id = ?;

-- name: RetryCandidate :many
-- RetryCandidate reads what Retry decides on (queue/retry.go), locked
-- until the transaction ends.
SELECT status, expires_at FROM jobs WHERE id = ? FOR UPDATE;

-- name: RetryJob :execrows
-- RetryJob writes what Retry decided, fenced by the status it read.
UPDATE jobs
SET status = 'pending', attempts = 0, error = NULL, finished_at = NULL,
    claim_token = NULL, lease_until = NULL, scheduled_at = sqlc.arg(now),
    expires_at = sqlc.narg(expires_at)
WHERE id = sqlc.arg(id) AND status = sqlc.arg(read_status);

-- name: ExpireOverdue :execrows
-- ExpireOverdue expires one bounded batch of overdue pending jobs (MySQL
-- allows LIMIT on UPDATE); Queue.ExpireOverdue repeats it.
UPDATE jobs
SET status = 'expired', finished_at = sqlc.arg(now)
WHERE status = 'pending' AND expires_at <= sqlc.arg(now)
LIMIT ?;

-- name: PruneFinished :execrows
-- PruneFinished deletes one bounded batch (MySQL allows LIMIT on DELETE).
DELETE FROM jobs
WHERE status IN ('completed', 'failed', 'expired') AND finished_at < sqlc.arg(cutoff)
LIMIT ?;

-- name: PurgeJobs :execrows
-- PurgeJobs deletes every job, whatever its status (Queue.Purge).
DELETE FROM jobs;

-- The dashboard's overview (queue/overview.go). Each statement reads one
-- of the table's indexes and stops early, so that it stays fast on a table
-- of millions of rows: counts stop at a limit per status, the types are
-- found one index probe each (a loose index scan), and the oldest due job
-- and the latest failures are the first entries of an index range.

-- name: FirstType :many
SELECT j.type FROM jobs j ORDER BY j.type LIMIT 1;

-- name: NextType :many
-- NextType is the smallest type after the given one (index
-- type_status_scheduled).
SELECT j.type FROM jobs j WHERE j.type > ? ORDER BY j.type LIMIT 1;

-- name: CountStatusesUpTo :one
-- CountStatusesUpTo counts the jobs of each status, each count stopping at
-- the limits given (the same five times; index status_scheduled).
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'pending' LIMIT ?) a) AS pending,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'in_progress' LIMIT ?) b) AS in_progress,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'completed' LIMIT ?) c) AS completed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'failed' LIMIT ?) d) AS failed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'expired' LIMIT ?) e) AS expired;

-- name: CountStatusesOfTypeUpTo :one
-- CountStatusesOfTypeUpTo is CountStatusesUpTo for one type (index
-- type_status_scheduled); type and limit are given for each status.
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = ? AND j.status = 'pending' LIMIT ?) a) AS pending,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = ? AND j.status = 'in_progress' LIMIT ?) b) AS in_progress,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = ? AND j.status = 'completed' LIMIT ?) c) AS completed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = ? AND j.status = 'failed' LIMIT ?) d) AS failed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = ? AND j.status = 'expired' LIMIT ?) e) AS expired;

-- name: OldestDuePending :many
-- OldestDuePending is the pending job due longest ago (index status_scheduled).
SELECT * FROM jobs
WHERE status = 'pending' AND scheduled_at <= ?
ORDER BY scheduled_at, id
LIMIT 1;

-- name: OldestDuePendingOfType :many
SELECT * FROM jobs
WHERE type = ? AND status = 'pending' AND scheduled_at <= ?
ORDER BY scheduled_at, id
LIMIT 1;

-- name: RecentFailures :many
-- RecentFailures lists failed jobs, the last scheduled first (index
-- status_scheduled read backwards; a failed job's scheduled_at is when its
-- last attempt was due).
SELECT * FROM jobs
WHERE status = 'failed'
ORDER BY scheduled_at DESC, id DESC
LIMIT ?;

-- Job control (Queue.Cancel, Queue.Delete and their bulk forms). MySQL has
-- no RETURNING: a batch locks its rows and reads their statuses
-- (LockJobStatuses), then changes them, in one short READ COMMITTED
-- transaction.

-- name: LockJobStatuses :many
-- LockJobStatuses locks the rows of a control statement and reads what the
-- queue decides from: the status, and for Cancel the type and lease_until
-- (who counts a cancelled attempt: cancelCountedHere).
SELECT id, status, type, lease_until FROM jobs WHERE id IN (sqlc.slice(ids)) FOR UPDATE;

-- name: CancelJobs :execrows
-- CancelJobs ends the pending and in_progress jobs among the ids with the
-- outcome the queue decides, clearing the claim token of a running attempt
-- so that the attempt is fenced off.
UPDATE jobs
SET status = sqlc.arg(status), error = sqlc.arg(error), finished_at = sqlc.narg(finished_at),
    claim_token = NULL, lease_until = NULL
WHERE id IN (sqlc.slice(ids)) AND status IN ('pending', 'in_progress');

-- name: DeleteJobs :execrows
-- DeleteJobs deletes the jobs among the ids that are not in_progress.
DELETE FROM jobs WHERE id IN (sqlc.slice(ids)) AND status <> 'in_progress';

-- Unique jobs (queue/unique.go): the side table jobs_unique holds one row
-- per job enqueued with a key; the unique index on live_key lets one job
-- hold a key at a time. The queue decides in Go whether a holder is still
-- live (its job pending or in_progress, or UniqueFor's period running).
-- A keyed enqueue inserts the job, then its key row, in one READ
-- COMMITTED transaction; reads of the key rows lock them, so that they see
-- the latest committed rows whatever the transaction's snapshot.

-- name: ProbeUnique :many
SELECT job_id, unique_key, live_key, held_until FROM jobs_unique LIMIT 0;

-- name: InsertKey :execresult
-- InsertKey takes a key for a job just inserted. When another job holds
-- it, the no-op update takes an exclusive lock on the holder's row (so
-- concurrent inserters of one key queue up instead of deadlocking) and
-- makes the holder's job_id the statement's insert id; when the row is
-- inserted, the insert id is 0 (the table has no AUTO_INCREMENT). The
-- insert id tells the two apart, not the affected rows: a connection with
-- clientFoundRows=true counts the holder's unchanged row as affected, as
-- it counts an inserted one.
INSERT INTO jobs_unique (job_id, unique_key, live_key, held_until)
VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE job_id = LAST_INSERT_ID(job_id);

-- name: DeleteJob :exec
-- DeleteJob removes a job just inserted whose key was taken.
DELETE FROM jobs WHERE id = ?;

-- name: KeyHolderForUpdate :many
SELECT job_id, held_until FROM jobs_unique WHERE live_key = ? FOR UPDATE;

-- name: HolderStatus :many
SELECT status FROM jobs WHERE id = ?;

-- name: HolderStatusForUpdate :many
SELECT status FROM jobs WHERE id = ? FOR UPDATE;

-- name: FreeKey :exec
UPDATE jobs_unique SET live_key = NULL WHERE job_id = ?;

-- name: JobKeyForUpdate :many
SELECT unique_key, live_key, held_until FROM jobs_unique WHERE job_id = ? FOR UPDATE;

-- name: RetakeKey :execrows
UPDATE jobs_unique SET live_key = unique_key WHERE job_id = ? AND live_key IS NULL;

-- name: DeleteKeys :exec
DELETE FROM jobs_unique WHERE job_id IN (sqlc.slice(ids));

-- name: KeyWindow :one
-- KeyWindow reads the window of at most ? key rows after job_id
-- after in job_id order, which one maintenance pass examines for orphans
-- (DeleteOrphanKeys): how many rows it holds and its last job_id (0: none).
-- It reads those rows of the primary key only, never the whole key table.
SELECT COUNT(*) AS seen, CAST(COALESCE(MAX(w.job_id), 0) AS UNSIGNED) AS last_id
FROM (SELECT u.job_id FROM jobs_unique u WHERE u.job_id > sqlc.arg(after) ORDER BY u.job_id LIMIT ?) AS w;

-- name: DeleteOrphanKeys :execrows
-- DeleteOrphanKeys deletes the key rows of a window read by KeyWindow
-- (job_id in (after, last_id]) whose job is gone (Prune, and jobs deleted
-- on success): such a key is free already. A key whose job exists is never
-- deleted.
DELETE FROM jobs_unique
WHERE job_id > sqlc.arg(after) AND job_id <= sqlc.arg(last_id)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = jobs_unique.job_id);

-- The leader's lease (queue/leader.go) lives in the side table jobs_leader
-- and is timed by the database server's clock, so that every process
-- compares it against one clock: now is UTC_TIMESTAMP(), the same all
-- through one statement. It keeps whole seconds (sqlc knows no
-- UTC_TIMESTAMP(6), and NOW(6) follows the session's time zone), so a lease
-- may start up to a second before the statement: the holder allows for it.

-- A periodic job's last tick enqueued (queue/periodic.go) is a row of
-- jobs_leader of its own, named tick:<digest of the periodic name>,
-- holder the periodic name, term the tick in Unix nanoseconds: written in
-- the leader's act that enqueues the tick, it outlives the tick's job
-- (deleted, pruned, deleted on success) and its unique key. renewals
-- holds the next tick that the schedule of the leader that wrote it gives
-- after that tick (Unix nanoseconds; 0: unknown, as an older version
-- wrote it), so that a later leader whose schedule changed can tell
-- whether a tick was missed (RunMissed).

-- name: PeriodicLastTick :many
-- PeriodicLastTick reads a periodic job's last tick enqueued and the next
-- tick recorded with it (no row: none).
SELECT term, renewals AS next_nanos FROM jobs_leader WHERE name = sqlc.arg(name);

-- name: SetPeriodicLastTick :exec
-- SetPeriodicLastTick records tick_nanos as a periodic job's last tick
-- enqueued (and next_nanos, the next tick its schedule gives), in place
-- of the one recorded: the act that writes it read the record first
-- (PeriodicLastTick) and enqueued a later tick, or found the
-- record more than a minute ahead of the server's clock (written by a
-- leader whose clock was ahead), which must not go on refusing ticks until
-- real time catches up (GREATEST kept it).
INSERT INTO jobs_leader (name, holder, term, renewals, since, renewed_at, lease_until)
VALUES (sqlc.arg(name), sqlc.arg(periodic), sqlc.arg(tick_nanos), sqlc.arg(next_nanos), '1970-01-01 00:00:01', '1970-01-01 00:00:01', '1970-01-01 00:00:01')
ON DUPLICATE KEY UPDATE term = sqlc.arg(tick_nanos), renewals = sqlc.arg(next_nanos);

-- name: EnsureLeaderRow :exec
-- EnsureLeaderRow creates the role's row, held by nobody, if it is missing.
INSERT INTO jobs_leader (name, holder, term, renewals, since, renewed_at, lease_until)
VALUES (sqlc.arg(name), '', 0, 0, '1970-01-01 00:00:01', '1970-01-01 00:00:01', '1970-01-01 00:00:01')
ON DUPLICATE KEY UPDATE name = name;

-- name: AcquireLeader :execrows
-- AcquireLeader takes the role for holder for lease_micros from now when
-- its lease has passed, or renews it when holder holds it; one row changed
-- means holder leads (renewals changes every time, so that MySQL, which
-- counts only rows whose values changed, counts the row). A new term (and since) starts whenever the lease had
-- passed, even for the same holder. MySQL assigns from left to right:
-- term and since read holder and lease_until before they change.
UPDATE jobs_leader
SET term = CASE WHEN holder = sqlc.arg(holder) AND lease_until >= UTC_TIMESTAMP()
        THEN term ELSE term + 1 END,
    since = CASE WHEN holder = sqlc.arg(holder) AND lease_until >= UTC_TIMESTAMP()
        THEN since ELSE UTC_TIMESTAMP() END,
    holder = sqlc.arg(holder),
    renewals = renewals + 1,
    renewed_at = UTC_TIMESTAMP(),
    lease_until = TIMESTAMPADD(MICROSECOND, sqlc.arg(lease_micros), UTC_TIMESTAMP())
WHERE name = sqlc.arg(name)
  AND (holder = sqlc.arg(holder) OR lease_until < UTC_TIMESTAMP());

-- name: ReleaseLeader :execrows
-- ReleaseLeader ends holder's lease now, so that another process takes the
-- role at once: a microsecond before UTC_TIMESTAMP(), since that keeps
-- whole seconds and a lease that ends in the current second still holds
-- until the next (AcquireLeader takes over a lease_until before now;
-- Queue.Leader shows it active).
UPDATE jobs_leader
SET lease_until = TIMESTAMPADD(MICROSECOND, -1, UTC_TIMESTAMP())
WHERE name = sqlc.arg(name) AND holder = sqlc.arg(holder)
  AND lease_until > UTC_TIMESTAMP();

-- name: GetLeader :one
-- GetLeader reads the role's row and the server's time.
SELECT holder, term, since, renewed_at, lease_until, UTC_TIMESTAMP() AS db_now
FROM jobs_leader
WHERE name = sqlc.arg(name);

-- name: FenceLeaderAct :execrows
-- FenceLeaderAct is the first statement of each act of a leader, in the
-- act's transaction (queue/fence.go): it changes the role's fence row
-- (fence_name; one row) only while it names holder and term, and so locks
-- it until the transaction ends, so that a takeover, which writes the
-- fence row (SetLeaderFence), waits for the act to end. LeaderLeaseHeld
-- then checks the role's row, without locking it: the leader's own renewal
-- (AcquireLeader) writes that row and must not wait for its acts (a
-- multi-table UPDATE would read it with a shared lock, even at READ
-- COMMITTED). A write, not a locking read: Galera replicates no locks, but
-- the act's write set then holds the fence row's key, so the cluster
-- refuses whichever of the act and a takeover on another node commits
-- second. It must change a value (an unchanged row is no write and puts no
-- key in the write set): renewals, which counts the acts.
UPDATE jobs_leader SET renewals = renewals + 1
WHERE name = sqlc.arg(fence_name) AND holder = sqlc.arg(holder) AND term = sqlc.arg(term);

-- name: LeaderLeaseHeld :one
-- LeaderLeaseHeld counts the role's row (0 or 1) when holder holds it in
-- term with a lease that has not passed: the second statement of an act's
-- fence (FenceLeaderAct), a consistent read that locks nothing. It
-- returns the server's time too (db_now, whole seconds), which bounds a
-- periodic tick the act enqueues (queue/periodic_clock.go) without a
-- round trip of its own.
SELECT COUNT(*) AS held, UTC_TIMESTAMP() AS db_now FROM jobs_leader
WHERE name = sqlc.arg(name) AND holder = sqlc.arg(holder) AND term = sqlc.arg(term)
  AND lease_until > UTC_TIMESTAMP();

-- name: LeaderFenceBehind :many
-- LeaderFenceBehind returns the role's term when its fence row
-- (fence_name) does not name the role's holder and term (or is missing):
-- after a takeover, in the takeover's transaction, which then moves the
-- fence row on (SetLeaderFence). A consistent read: a renewal, whose fence
-- row is up to date, waits for no act.
SELECT l.term
FROM jobs_leader l
WHERE l.name = sqlc.arg(name) AND l.holder = sqlc.arg(holder)
  AND NOT EXISTS (
    SELECT 1 FROM jobs_leader f
    WHERE f.name = sqlc.arg(fence_name) AND f.holder = l.holder AND f.term = l.term);

-- name: SetLeaderFence :exec
-- SetLeaderFence makes the role's fence row (fence_name) name holder and
-- term, creating it if missing (a table installed before it existed). It
-- waits for the acts in flight, which hold the row (FenceLeaderAct), and
-- on Galera its write set holds the row's key: an act of an earlier term
-- commits before the new term can act, or is refused.
INSERT INTO jobs_leader (name, holder, term, renewals, since, renewed_at, lease_until)
VALUES (sqlc.arg(fence_name), sqlc.arg(holder), sqlc.arg(term), 0, UTC_TIMESTAMP(),
    '1970-01-01 00:00:01', '1970-01-01 00:00:01')
ON DUPLICATE KEY UPDATE holder = sqlc.arg(holder), term = sqlc.arg(term),
    renewals = renewals + 1, since = UTC_TIMESTAMP();

-- name: TakeWakeSlot :one
-- TakeWakeSlot takes wake slot sqlc.arg(slot) of the table
-- (sqlc.arg(table_name)) for this session without waiting: taken is 1 when
-- taken, 0 when another session holds it; session_id is this session's id.
-- The session holds the slot until it ends. Wake-ups across processes
-- (queue/wake_mysql.go): an idle worker process waits for enqueues
-- (WaitForEnqueues) on a connection of its own that holds one of the
-- table's wake slots, user locks named after the database, the table and
-- the slot's number (0 to 63); an enqueue of another process reads which
-- sessions hold them (SelectWaitingSessions) and interrupts their waits
-- (KILL QUERY, which sqlc cannot compile with a parameter: the queue sends
-- it with the session's id, an integer the server gave).
SELECT /* jobqueue:no-table */ CAST(COALESCE(GET_LOCK(
    CONCAT('jobqueue wake ', SHA1(CONCAT(DATABASE(), '.', CAST(sqlc.arg(table_name) AS CHAR))), ' ', CAST(sqlc.arg(slot) AS SIGNED)),
    0), 0) AS SIGNED) AS taken,
    CAST(CONNECTION_ID() AS SIGNED) AS session_id;

-- name: TakeWakeBell :one
-- TakeWakeBell takes the bell of wake slot sqlc.arg(slot) of the table
-- (sqlc.arg(table_name)) without waiting: 1 when taken. A second session
-- of the waiting worker holds it, so that WaitForEnqueues on the slot's
-- session waits for it until interrupted.
SELECT /* jobqueue:no-table */ CAST(COALESCE(GET_LOCK(
    CONCAT('jobqueue bell ', SHA1(CONCAT(DATABASE(), '.', CAST(sqlc.arg(table_name) AS CHAR))), ' ', CAST(sqlc.arg(slot) AS SIGNED)),
    0), 0) AS SIGNED) AS taken;

-- name: WaitForEnqueues :one
-- WaitForEnqueues waits up to sqlc.arg(seconds) seconds for the bell of wake
-- slot sqlc.arg(slot) of the table (sqlc.arg(table_name)), which another
-- session holds: 0 when the wait ran out, -1 when it was interrupted (KILL
-- QUERY; MySQL's GET_LOCK returns NULL, MariaDB fails with error 1317), 1
-- when the bell was taken: its holder has ended. A wait for a user lock, not
-- SLEEP: KILL QUERY of one of several sessions in SLEEP at once sometimes
-- took 2 seconds on MariaDB 10.11, of one waiting for a user lock never.
SELECT /* jobqueue:no-table */ CAST(COALESCE(GET_LOCK(
    CONCAT('jobqueue bell ', SHA1(CONCAT(DATABASE(), '.', CAST(sqlc.arg(table_name) AS CHAR))), ' ', CAST(sqlc.arg(slot) AS SIGNED)),
    sqlc.arg(seconds)), -1) AS SIGNED) AS outcome;

-- name: SelectWaitingSessions :many
-- SelectWaitingSessions lists the sessions that hold a wake slot of the
-- table (sqlc.arg(table_name)), each once, and 0 when a slot is free (the
-- queue drops it: waitingSessionsOf). Each slot's holder is read once: a
-- filter of the free slots in SQL read it twice (MariaDB merges the
-- derived table into the outer query), and a session that ended between
-- the two reads came back as a NULL session id.
WITH RECURSIVE slots (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM slots WHERE n < 63)
SELECT /* jobqueue:no-table */ DISTINCT CAST(COALESCE(IS_USED_LOCK(
    CONCAT('jobqueue wake ', SHA1(CONCAT(DATABASE(), '.', CAST(sqlc.arg(table_name) AS CHAR))), ' ', n)),
    0) AS SIGNED) AS session_id
FROM slots;
