-- Queries of the queue on SQLite 3.35+. They name the table `jobs`; the
-- queue sends them to the table chosen at run time (queue/dbtx.go rewrites
-- the identifier). Every time is passed from Go (the queue's UTC clock) as
-- fixed-width UTC text, so that text comparisons order times correctly.
-- Lists are passed as JSON arrays (one parameter each).

-- name: ProbeTable :many
-- ProbeTable names every version 2 column, so that a missing table or an
-- outdated one fails here.
SELECT id, name, type, payload, status, attempts, claim_token, lease_until,
       max_attempts, base_delay, max_delay, error, scheduled_at, expires_at,
       finished_at, created_at
FROM jobs
LIMIT 0;

-- name: InsertJob :one
INSERT INTO jobs (name, type, payload, status, attempts, max_attempts, base_delay,
                  max_delay, scheduled_at, expires_at, created_at)
VALUES (@name, @type, @payload, 'pending', 0, @max_attempts, @base_delay,
        @max_delay, @scheduled_at, sqlc.narg(expires_at), @created_at)
RETURNING id;

-- name: InsertJobsJSON :execrows
-- InsertJobsJSON inserts every job of a JSON array of objects in one
-- statement (one parameter, so no placeholder limit). Times in the JSON are
-- already in the fixed-width UTC form.
INSERT INTO jobs (name, type, payload, status, attempts, max_attempts, base_delay,
                  max_delay, scheduled_at, expires_at, created_at)
SELECT json_extract(r.value, '$.name'), json_extract(r.value, '$.type'),
       json_extract(r.value, '$.payload'), 'pending', 0,
       json_extract(r.value, '$.max_attempts'), json_extract(r.value, '$.base_delay'),
       json_extract(r.value, '$.max_delay'), json_extract(r.value, '$.scheduled_at'),
       json_extract(r.value, '$.expires_at'), @created_at
FROM json_each(sqlc.arg(rows)) AS r
ORDER BY r.key;

-- name: ClaimJobs :many
-- ClaimJobs claims due jobs: of every type when sqlc.narg(type) and
-- sqlc.narg(types) are both NULL (index status_scheduled), of one type when
-- type is set (index type_status_scheduled), of the types of the JSON array
-- types when that is set. Each filter is its own candidate query, so that
-- each keeps its plan; the two whose parameter test is false stop at that
-- test, evaluated once before any row is read. SQLite has one writer at a
-- time, so no row is claimed twice. The one UPDATE writes the claim token
-- of the attempt it starts, attemptToken(batch token, id) of
-- queue/attempt.go, spelled here as sqlc.arg(token) || '-' || id
-- (TestClaimTokenFormat checks it against the Go function for each filter).
-- Each candidate query starts after (sqlc.arg(after_at), sqlc.arg(after_id))
-- in (scheduled_at, id) order: a claimer's watermark (queue/claim_cursor.go),
-- or the year 1 and id 0 to scan from the start. The LIMIT is a CAST of
-- @max_jobs, not the bare parameter: SQLite 3.54 plans a bare LIMIT
-- parameter with its value, so a new value (the claimer asks for as many
-- jobs as it has room for) expired the prepared statement and every claim
-- parsed and planned it again (sqlite3Reprepare, 13 % of a claim's CPU);
-- the plan is the same either way. It returns what the claimed job's row
-- needs but what the claim itself wrote (status in_progress, @lease_until),
-- and the two times every job has as the text stored (CAST hides the
-- declared DATETIME type, which makes the driver try its time layouts one
-- by one while the write lock is held): queue/store_sqlite_attempts.go
-- reads them in the queue's one layout once the lock is released.
UPDATE jobs
SET status = 'in_progress', attempts = attempts + 1,
    claim_token = sqlc.arg(token) || '-' || id, lease_until = @lease_until
WHERE id IN (
    SELECT e.id FROM (
        SELECT j.id FROM jobs j
        WHERE CAST(sqlc.narg(type) AS TEXT) IS NULL AND CAST(sqlc.narg(types) AS TEXT) IS NULL
          AND j.status = 'pending' AND j.scheduled_at <= @now
          AND (j.scheduled_at, j.id) > (@after_at, CAST(@after_id AS INTEGER))
          AND (j.expires_at IS NULL OR j.expires_at > @now)
        ORDER BY j.scheduled_at, j.id
        LIMIT CAST(@max_jobs AS INTEGER)) e
    UNION ALL
    SELECT o.id FROM (
        SELECT j.id FROM jobs j
        WHERE sqlc.narg(type) IS NOT NULL AND j.type = sqlc.narg(type)
          AND j.status = 'pending' AND j.scheduled_at <= @now
          AND (j.scheduled_at, j.id) > (@after_at, CAST(@after_id AS INTEGER))
          AND (j.expires_at IS NULL OR j.expires_at > @now)
        ORDER BY j.scheduled_at, j.id
        LIMIT CAST(@max_jobs AS INTEGER)) o
    UNION ALL
    SELECT s.id FROM (
        SELECT j.id FROM jobs j
        WHERE sqlc.narg(types) IS NOT NULL
          AND j.type IN (SELECT t.value FROM json_each(sqlc.narg(types)) AS t)
          AND j.status = 'pending' AND j.scheduled_at <= @now
          AND (j.scheduled_at, j.id) > (@after_at, CAST(@after_id AS INTEGER))
          AND (j.expires_at IS NULL OR j.expires_at > @now)
        ORDER BY j.scheduled_at, j.id
        LIMIT CAST(@max_jobs AS INTEGER)) s)
RETURNING id, name, type, payload, attempts, claim_token, max_attempts, base_delay,
          max_delay, error, expires_at, finished_at,
          CAST(scheduled_at AS TEXT) AS scheduled_at, CAST(created_at AS TEXT) AS created_at;

-- name: DueJobExists :one
-- DueJobExists tells whether ClaimJobs with the same type and types would
-- find a job now, from the start of the table (no watermark), by the same
-- three candidate queries and indexes, reading one row at most. It only
-- reads: in WAL mode it waits for no writer and holds up none. An idle
-- worker's watcher (queue/wake_sqlite.go) asks it when another connection
-- has committed a change to the database file (PRAGMA data_version, which
-- sqlc cannot compile), before it wakes the claimer, whose claim takes the
-- write lock.
SELECT EXISTS (
    SELECT 1 FROM jobs j
    WHERE CAST(sqlc.narg(type) AS TEXT) IS NULL AND CAST(sqlc.narg(types) AS TEXT) IS NULL
      AND j.status = 'pending' AND j.scheduled_at <= @now
      AND (j.expires_at IS NULL OR j.expires_at > @now)
    UNION ALL
    SELECT 1 FROM jobs j
    WHERE sqlc.narg(type) IS NOT NULL AND j.type = sqlc.narg(type)
      AND j.status = 'pending' AND j.scheduled_at <= @now
      AND (j.expires_at IS NULL OR j.expires_at > @now)
    UNION ALL
    SELECT 1 FROM jobs j
    WHERE sqlc.narg(types) IS NOT NULL
      AND j.type IN (SELECT t.value FROM json_each(sqlc.narg(types)) AS t)
      AND j.status = 'pending' AND j.scheduled_at <= @now
      AND (j.expires_at IS NULL OR j.expires_at > @now)
) AS due;

-- name: ExtendLeases :many
-- ExtendLeases extends the leases of the attempts given as JSON arrays of
-- ids and tokens (a token names one job, so the pair is matched) and
-- returns the ids that still held their job.
UPDATE jobs
SET lease_until = @lease_until
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND claim_token IN (SELECT t.value FROM json_each(sqlc.arg(tokens)) AS t)
  AND status = 'in_progress'
RETURNING id;

-- name: CompleteJobs :many
UPDATE jobs
SET status = 'completed', finished_at = @now, claim_token = NULL, lease_until = NULL
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND claim_token IN (SELECT t.value FROM json_each(sqlc.arg(tokens)) AS t)
  AND status = 'in_progress'
RETURNING id;

-- name: DeleteCompletedJobs :many
DELETE FROM jobs
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND claim_token IN (SELECT t.value FROM json_each(sqlc.arg(tokens)) AS t)
  AND status = 'in_progress'
RETURNING id;

-- name: SelectHeldAttempts :many
-- SelectHeldAttempts reads the jobs that the given attempts still hold.
--
-- The end of an attempt that did not succeed (handler failure, release at
-- shutdown, reclaim of an abandoned attempt) is decided in Go, by one rule
-- (queue/outcome.go). These statements only read the attempts the rule
-- needs (SelectHeldAttempts, SelectAbandoned: bounded) and write what it
-- decided (EndAttempts, EndAbandonedAttempts, FailJob), fenced by
-- claim_token. sqlc.narg(retry_at) is when the job runs again, or NULL to
-- leave scheduled_at as it is.
SELECT * FROM jobs
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND claim_token IN (SELECT t.value FROM json_each(sqlc.arg(tokens)) AS t)
  AND status = 'in_progress';

-- name: SelectAbandoned :many
-- SelectAbandoned reads at most @max_rows abandoned attempts (in_progress,
-- lease passed; index lease_until).
SELECT * FROM jobs
WHERE lease_until < @now AND status = 'in_progress'
ORDER BY lease_until, id
LIMIT @max_rows;

-- name: EndAttempts :many
-- EndAttempts writes one decided end to the given attempts and returns the
-- ids it changed.
UPDATE jobs
SET status = @status, error = @error,
    scheduled_at = COALESCE(sqlc.narg(retry_at), scheduled_at),
    finished_at = sqlc.narg(finished_at), claim_token = NULL, lease_until = NULL
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND claim_token IN (SELECT t.value FROM json_each(sqlc.arg(tokens)) AS t)
  AND status = 'in_progress'
RETURNING id;

-- name: UnclaimJobs :many
-- UnclaimJobs gives back attempts that were claimed but never started (a
-- worker's buffered jobs that the shutdown cut off before an executor
-- took them, queue/shutdown.go): each job is pending again as it was
-- before its claim, its attempt not counted, its scheduled_at and error
-- kept.
UPDATE jobs
SET status = 'pending', attempts = attempts - 1, claim_token = NULL, lease_until = NULL
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND claim_token IN (SELECT t.value FROM json_each(sqlc.arg(tokens)) AS t)
  AND status = 'in_progress'
RETURNING id;

-- name: EndAbandonedAttempts :execrows
-- EndAbandonedAttempts is EndAttempts for reclaimed attempts: only those
-- whose lease is still passed (a heartbeat may have come in between).
-- With untokened set, a NULL claim_token matches too: an in_progress job
-- that no attempt names (written by hand or by another client) is
-- abandoned as well once its lease passed, and Queue.Reclaim ends each
-- such job on its own.
UPDATE jobs
SET status = @status, error = @error,
    scheduled_at = COALESCE(sqlc.narg(retry_at), scheduled_at),
    finished_at = sqlc.narg(finished_at), claim_token = NULL, lease_until = NULL
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND (claim_token IN (SELECT t.value FROM json_each(sqlc.arg(tokens)) AS t)
    OR (claim_token IS NULL AND sqlc.arg(untokened) = 1))
  AND status = 'in_progress' AND lease_until < @now;

-- name: FailJob :execrows
-- FailJob records one failed attempt as the queue decided.
UPDATE jobs
SET status = @status, error = @error,
    scheduled_at = COALESCE(sqlc.narg(retry_at), scheduled_at),
    finished_at = sqlc.narg(finished_at), claim_token = NULL, lease_until = NULL
WHERE id = @id AND claim_token = @token AND status = 'in_progress';

-- name: CountByStatus :many
SELECT status, count(*) AS n FROM jobs GROUP BY status;

-- name: CountByStatusOfType :many
SELECT status, count(*) AS n FROM jobs WHERE type = @type GROUP BY status;

-- name: ListJobs :many
-- ListJobs pages newest first on the primary key: the jobs with ids below
-- @before_id (the last id of the previous page, or the largest id for the
-- first), so every page is one backward range scan, never an OFFSET.
SELECT * FROM jobs
WHERE id < @before_id
  AND (sqlc.narg(status) IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(type) IS NULL OR type = sqlc.narg(type))
  AND (sqlc.narg(name) IS NULL OR name = sqlc.narg(name))
ORDER BY id DESC
LIMIT @max_rows;

-- name: ListJobsWindow :many
-- ListJobsWindow is ListJobs for a kind (and a status) within a window of
-- ids, @floor_id <= id < @before_id: no index holds the kind, so the page
-- is a backward range scan of the primary key that examines at most the
-- window's ids (Queue.ListPage).
SELECT * FROM jobs
WHERE id < @before_id AND id >= @floor_id
  AND name = @name
  AND (sqlc.narg(status) IS NULL OR status = sqlc.narg(status))
ORDER BY id DESC
LIMIT @max_rows;

-- name: JobIDBelow :many
-- JobIDBelow is the largest id below @before_id, if any: one step of the
-- primary key.
SELECT id FROM jobs WHERE id < @before_id ORDER BY id DESC LIMIT 1;

-- name: GetJob :many
SELECT * FROM jobs WHERE id = @id;

-- name: RetryCandidate :many
-- RetryCandidate reads what Retry decides on (queue/retry.go); the
-- transaction's write lock keeps it until the transaction ends.
SELECT status, expires_at FROM jobs WHERE id = @id;

-- name: RetryJob :execrows
-- RetryJob writes what Retry decided, fenced by the status it read.
UPDATE jobs
SET status = 'pending', attempts = 0, error = NULL, finished_at = NULL,
    claim_token = NULL, lease_until = NULL, scheduled_at = @now,
    expires_at = sqlc.narg(expires_at)
WHERE id = @id AND status = @read_status;

-- name: ExpireOverdue :execrows
-- ExpireOverdue expires one bounded batch of overdue pending jobs;
-- Queue.ExpireOverdue repeats it.
UPDATE jobs
SET status = 'expired', finished_at = @now
WHERE id IN (
    SELECT j.id FROM jobs j
    WHERE j.status = 'pending' AND j.expires_at <= @now
    LIMIT @max_rows);

-- name: PruneFinished :execrows
DELETE FROM jobs
WHERE id IN (
    SELECT j.id FROM jobs j
    WHERE j.status IN ('completed', 'failed', 'expired') AND j.finished_at < @cutoff
    LIMIT @max_rows);

-- name: PurgeJobs :execrows
-- PurgeJobs deletes every job, whatever its status (Queue.Purge).
DELETE FROM jobs;

-- The dashboard's overview (queue/overview.go). Each statement reads one
-- of the table's indexes and stops early, so that it stays fast on a table
-- of millions of rows: counts stop at @max_rows per status, the types are
-- found one index probe each (a loose index scan), and the oldest due job
-- and the latest failures are the first entries of an index range.

-- name: FirstType :many
SELECT j.type FROM jobs j ORDER BY j.type LIMIT 1;

-- name: NextType :many
-- NextType is the smallest type after @after (index type_status_scheduled).
SELECT j.type FROM jobs j WHERE j.type > @after ORDER BY j.type LIMIT 1;

-- name: CountStatusesUpTo :one
-- CountStatusesUpTo counts the jobs of each status, each count stopping at
-- @max_rows (index status_scheduled).
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'pending' LIMIT @max_rows) a) AS pending,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'in_progress' LIMIT @max_rows) b) AS in_progress,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'completed' LIMIT @max_rows) c) AS completed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'failed' LIMIT @max_rows) d) AS failed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'expired' LIMIT @max_rows) e) AS expired;

-- name: CountStatusesOfTypeUpTo :one
-- CountStatusesOfTypeUpTo is CountStatusesUpTo for one type (index
-- type_status_scheduled).
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'pending' LIMIT @max_rows) a) AS pending,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'in_progress' LIMIT @max_rows) b) AS in_progress,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'completed' LIMIT @max_rows) c) AS completed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'failed' LIMIT @max_rows) d) AS failed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'expired' LIMIT @max_rows) e) AS expired;

-- name: OldestDuePending :many
-- OldestDuePending is the pending job due longest ago (index status_scheduled).
SELECT * FROM jobs
WHERE status = 'pending' AND scheduled_at <= @now
ORDER BY scheduled_at, id
LIMIT 1;

-- name: OldestDuePendingOfType :many
SELECT * FROM jobs
WHERE type = @type AND status = 'pending' AND scheduled_at <= @now
ORDER BY scheduled_at, id
LIMIT 1;

-- name: RecentFailures :many
-- RecentFailures lists failed jobs, the last scheduled first (index
-- status_scheduled read backwards; a failed job's scheduled_at is when its
-- last attempt was due).
SELECT * FROM jobs
WHERE status = 'failed'
ORDER BY scheduled_at DESC, id DESC
LIMIT @max_rows;

-- Job control (Queue.Cancel, Queue.Delete and their bulk forms): one
-- statement per bounded batch of ids, given as a JSON array.

-- name: CancelCandidates :many
-- CancelCandidates reads the jobs among the ids that CancelJobs would end,
-- with what the queue decides from who counts a cancelled attempt
-- (cancelCountedHere): their type, status and lease_until. SQLite's
-- RETURNING gives only the new values, so Cancel reads them first, in the
-- same transaction, which holds the write lock from its start (BEGIN
-- IMMEDIATE): no write comes between the read and CancelJobs.
SELECT id, type, status, lease_until FROM jobs
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND status IN ('pending', 'in_progress');

-- name: CancelJobs :many
-- CancelJobs ends the pending and in_progress jobs among the ids with the
-- outcome the queue decides (status, error, finished_at), clearing the
-- claim token of a running attempt so that the attempt is fenced off, and
-- returns the ids it changed.
UPDATE jobs
SET status = @status, error = @error, finished_at = @finished_at,
    claim_token = NULL, lease_until = NULL
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND status IN ('pending', 'in_progress')
RETURNING id;

-- name: DeleteJobs :many
-- DeleteJobs deletes the jobs among the ids that are not in_progress and
-- returns the ids it deleted.
DELETE FROM jobs
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i)
  AND status <> 'in_progress'
RETURNING id;

-- name: JobStatuses :many
-- JobStatuses reads the status of the jobs among the ids (to tell the ids
-- that a control statement left alone: missing, finished or running).
SELECT id, status FROM jobs
WHERE id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i);

-- Unique jobs (queue/unique.go): the side table jobs_unique holds one row
-- per job enqueued with a key; the unique index on live_key lets one job
-- hold a key at a time. The queue decides in Go whether a holder is still
-- live (its job pending or in_progress, or UniqueFor's period running).
-- A keyed enqueue inserts the job, then its key row, in one transaction.

-- name: ProbeUnique :many
SELECT job_id, unique_key, live_key, held_until FROM jobs_unique LIMIT 0;

-- name: InsertKey :execrows
-- InsertKey takes a key for a job just inserted; 0 rows: another job
-- holds it.
INSERT INTO jobs_unique (job_id, unique_key, live_key, held_until)
VALUES (@job_id, @unique_key, @unique_key, @held_until)
ON CONFLICT (live_key) DO NOTHING;

-- name: InsertKeyed :one
-- InsertKeyed inserts a job holding a free key in one statement (the view
-- jobs_keyed's trigger writes the job, then its key row); when another row
-- holds the key the statement fails with a unique constraint error and
-- writes nothing. RETURNING reads the new job's id from the key row, which
-- the trigger has written by then.
INSERT INTO jobs_keyed (name, type, payload, max_attempts, base_delay, max_delay,
                        scheduled_at, expires_at, created_at, unique_key, held_until)
VALUES (@name, @type, @payload, @max_attempts, @base_delay, @max_delay,
        @scheduled_at, sqlc.narg(expires_at), @created_at, @unique_key, @held_until)
RETURNING (SELECT u.job_id FROM jobs_unique AS u WHERE u.live_key = @unique_key) AS id;

-- name: DeleteJob :exec
-- DeleteJob removes a job just inserted whose key was taken.
DELETE FROM jobs WHERE id = @id;

-- name: KeyHolder :many
SELECT job_id, held_until FROM jobs_unique WHERE live_key = @unique_key;

-- name: HolderStatus :many
SELECT status FROM jobs WHERE id = @id;

-- name: FreeKey :exec
UPDATE jobs_unique SET live_key = NULL WHERE job_id = @job_id;

-- name: JobKey :many
SELECT unique_key, live_key, held_until FROM jobs_unique WHERE job_id = @job_id;

-- name: RetakeKey :execrows
UPDATE jobs_unique SET live_key = unique_key WHERE job_id = @job_id AND live_key IS NULL;

-- name: DeleteKeys :exec
DELETE FROM jobs_unique WHERE job_id IN (SELECT i.value FROM json_each(sqlc.arg(ids)) AS i);

-- name: KeyWindow :one
-- KeyWindow reads the window of at most @max_rows key rows after job_id
-- @after in job_id order, which one maintenance pass examines for orphans
-- (DeleteOrphanKeys): how many rows it holds and its last job_id (0: none).
-- It reads those rows of the primary key only, never the whole key table.
SELECT COUNT(*) AS seen, CAST(COALESCE(MAX(w.job_id), 0) AS INTEGER) AS last_id
FROM (SELECT u.job_id FROM jobs_unique u WHERE u.job_id > @after ORDER BY u.job_id LIMIT @max_rows) AS w;

-- name: DeleteOrphanKeys :execrows
-- DeleteOrphanKeys deletes the key rows of a window read by KeyWindow
-- (job_id in (@after, @last_id]) whose job is gone (Prune, and jobs deleted
-- on success): such a key is free already. A key whose job exists is never
-- deleted.
DELETE FROM jobs_unique
WHERE job_id > @after AND job_id <= @last_id
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = jobs_unique.job_id);

-- The leader's lease (queue/leader.go) lives in the side table jobs_leader
-- and is timed by SQLite's clock, 'now' (the same all through one
-- statement), written as text in one fixed format so that text comparisons
-- order times.

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
SELECT term, renewals AS next_nanos FROM jobs_leader WHERE name = @name;

-- name: SetPeriodicLastTick :exec
-- SetPeriodicLastTick records tick_nanos as a periodic job's last tick
-- enqueued (and next_nanos, the next tick its schedule gives), in place
-- of the one recorded: the act that writes it read the record first
-- (PeriodicLastTick) and enqueued a later tick, or found the
-- record more than a minute ahead of the server's clock (written by a
-- leader whose clock was ahead), which must not go on refusing ticks until
-- real time catches up (GREATEST kept it).
INSERT INTO jobs_leader (name, holder, term, renewals, since, renewed_at, lease_until)
VALUES (@name, @periodic, @tick_nanos, @next_nanos, '1970-01-01 00:00:00.000', '1970-01-01 00:00:00.000', '1970-01-01 00:00:00.000')
ON CONFLICT (name) DO UPDATE SET term = excluded.term, renewals = excluded.renewals;

-- name: EnsureLeaderRow :exec
-- EnsureLeaderRow creates the role's row, held by nobody, if it is missing.
INSERT INTO jobs_leader (name, holder, term, renewals, since, renewed_at, lease_until)
VALUES (@name, '', 0, 0, '1970-01-01 00:00:00.000', '1970-01-01 00:00:00.000', '1970-01-01 00:00:00.000')
ON CONFLICT (name) DO NOTHING;

-- name: AcquireLeader :execrows
-- AcquireLeader takes the role for holder until 'now' moved by
-- lease_modifier (such as '+5.000 seconds') when its lease has passed, or
-- renews it when holder holds it; one row changed means holder leads. A new
-- term (and since) starts whenever the lease had passed.
UPDATE jobs_leader
SET term = CASE WHEN holder = @holder AND lease_until >= strftime('%Y-%m-%d %H:%M:%f', 'now')
        THEN term ELSE term + 1 END,
    since = CASE WHEN holder = @holder AND lease_until >= strftime('%Y-%m-%d %H:%M:%f', 'now')
        THEN since ELSE strftime('%Y-%m-%d %H:%M:%f', 'now') END,
    holder = @holder,
    renewals = renewals + 1,
    renewed_at = strftime('%Y-%m-%d %H:%M:%f', 'now'),
    lease_until = strftime('%Y-%m-%d %H:%M:%f', 'now', @lease_modifier)
WHERE name = @name
  AND (holder = @holder OR lease_until < strftime('%Y-%m-%d %H:%M:%f', 'now'));

-- name: ReleaseLeader :execrows
-- ReleaseLeader ends holder's lease now, so that another process takes the
-- role at once: a millisecond before now, since SQLite's times count
-- milliseconds and a lease that ends in the current one still holds
-- (AcquireLeader takes over a lease_until before now; Queue.Leader shows
-- it active).
UPDATE jobs_leader
SET lease_until = strftime('%Y-%m-%d %H:%M:%f', 'now', '-0.001 seconds')
WHERE name = @name AND holder = @holder
  AND lease_until > strftime('%Y-%m-%d %H:%M:%f', 'now');

-- name: GetLeader :one
-- GetLeader reads the role's row and SQLite's time.
SELECT holder, term, since, renewed_at, lease_until,
    strftime('%Y-%m-%d %H:%M:%f', 'now') AS db_now
FROM jobs_leader
WHERE name = @name;

-- name: FenceLeaderAct :many
-- FenceLeaderAct is the first statement of each act of a leader, in the
-- act's transaction (queue/fence.go): it changes (to the same values) the
-- role's fence row (fence_name) only while it names holder and term and
-- holder holds the role's row in term with a lease that has not passed,
-- and the one row it returns says so. Being a write, it takes the database's
-- write lock at once, so that a takeover (AcquireLeader, SetLeaderFence)
-- waits for the act to end; so does the leader's own renewal, since SQLite
-- has one writer at a time. It returns SQLite's time (db_now), which
-- bounds a periodic tick the act enqueues (queue/periodic_clock.go)
-- without a statement of its own.
UPDATE jobs_leader SET term = term
WHERE jobs_leader.name = @fence_name AND jobs_leader.holder = @holder AND jobs_leader.term = @term
  AND EXISTS (
    SELECT 1 FROM jobs_leader l
    WHERE l.name = @name AND l.holder = @holder AND l.term = @term
      AND l.lease_until > strftime('%Y-%m-%d %H:%M:%f', 'now'))
RETURNING strftime('%Y-%m-%d %H:%M:%f', 'now') AS db_now;

-- name: LeaderFenceBehind :many
-- LeaderFenceBehind returns the role's term when its fence row
-- (fence_name) does not name the role's holder and term (or is missing):
-- after a takeover, in the takeover's transaction, which then moves the
-- fence row on (SetLeaderFence).
SELECT l.term
FROM jobs_leader l
WHERE l.name = @name AND l.holder = @holder
  AND NOT EXISTS (
    SELECT 1 FROM jobs_leader f
    WHERE f.name = @fence_name AND f.holder = l.holder AND f.term = l.term);

-- name: SetLeaderFence :exec
-- SetLeaderFence makes the role's fence row (fence_name) name holder and
-- term, creating it if missing (a table installed before it existed).
INSERT INTO jobs_leader (name, holder, term, renewals, since, renewed_at, lease_until)
VALUES (@fence_name, @holder, @term, 0, strftime('%Y-%m-%d %H:%M:%f', 'now'),
    '1970-01-01 00:00:00.000', '1970-01-01 00:00:00.000')
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder, term = excluded.term, renewals = renewals + 1,
    since = excluded.since;
