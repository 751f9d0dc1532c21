-- Queries of the queue on PostgreSQL. They name the table `jobs`; the queue
-- sends them to the table chosen at run time (queue/dbtx.go rewrites the
-- identifier). Every time is passed from Go (the queue's UTC clock), never
-- read from the server's clock. Lists are passed as JSON (one parameter) to
-- stay clear of driver-specific array types.

-- name: ProbeTable :many
-- ProbeTable names every version 2 column, so that a missing table or an
-- outdated one fails here.
SELECT id, name, type, payload, status, attempts, claim_token, lease_until,
       max_attempts, base_delay, max_delay, error, scheduled_at, expires_at,
       finished_at, created_at
FROM jobs
LIMIT 0;

-- Enqueues NOTIFY the channel named like the table (@channel: the name as
-- the database stores it) with the job type as payload, so that idle
-- workers LISTENing there (ListenJobs) wake at once. PostgreSQL delivers a
-- notification when its transaction commits, never when it rolls back, and
-- folds identical ones of one transaction into one; but it also makes the
-- commits of notifying transactions wait for one another (a database-wide
-- lock held through the commit). So the inserts the queue commits itself
-- (InsertJob, InsertJobsJSON) do not notify: the queue sends NotifyTypes
-- afterwards, one statement in flight per queue for a whole burst. The
-- inserts in a caller's transaction (InsertJobNotify, InsertJobsJSONNotify)
-- notify in the statement itself (no extra round trip), so that the
-- notification rides the caller's commit.

-- name: InsertJob :one
INSERT INTO jobs (name, type, payload, status, attempts, max_attempts, base_delay,
                  max_delay, scheduled_at, expires_at, created_at)
VALUES (@name, @type, @payload, 'pending', 0, @max_attempts, @base_delay,
        @max_delay, @scheduled_at, sqlc.narg(expires_at), @created_at)
RETURNING id;

-- name: InsertJobNotify :one
-- InsertJobNotify is InsertJob that also notifies the job's type. The
-- function scan, lateral to the one inserted row, runs pg_notify once.
WITH ins AS (
    INSERT INTO jobs (name, type, payload, status, attempts, max_attempts, base_delay,
                      max_delay, scheduled_at, expires_at, created_at)
    VALUES (@name, @type, @payload, 'pending', 0, @max_attempts, @base_delay,
            @max_delay, @scheduled_at, sqlc.narg(expires_at), @created_at)
    RETURNING id, type)
SELECT ins.id FROM ins CROSS JOIN LATERAL pg_notify(sqlc.arg(channel)::text, ins.type) AS n;

-- name: NotifyUnclaimed :exec
-- NotifyUnclaimed is the NOTIFY of the job that InsertJob inserted before
-- it in the same transaction (the current value of the table's id
-- sequence, @table_name being the table's quoted name), sent only when a
-- claim after the insert left the job pending: the first Enqueue after a
-- quiet spell that runs an idle worker's claim (queue/claim_offer.go) wakes
-- no one for a job that claim took.
-- The row is found by its primary key alone: currval, volatile, runs once
-- in a subquery (in the WHERE clause it made the plan a scan calling it for
-- every row), and the status is looked at in the select list (in the WHERE
-- clause, a plan made on a new table chose the status index, and read every
-- pending job).
SELECT CASE WHEN j.status = 'pending' THEN pg_notify(sqlc.arg(channel)::text, j.type) END
FROM jobs j
WHERE j.id = (SELECT currval(pg_get_serial_sequence(sqlc.arg(table_name)::text, 'id')));

-- name: FlushCommits :exec
-- FlushCommits writes one WAL record (a transactional logical message of
-- prefix 'jobqueue', which logical decoding passes on and everything else
-- ignores) in a transaction of its own, so that its commit, at the
-- session's synchronous_commit, waits for the WAL flush (and for
-- synchronous standbys) up to its own record, and so up to every commit
-- before it. The first Enqueue after a quiet spell commits its insert
-- without waiting and sends this in the same round trip
-- (queue/enqueue_postgres_early.go): the job is visible at once and
-- durable when Enqueue returns.
SELECT /* jobqueue:no-table */ pg_logical_emit_message(true, 'jobqueue', 'flush');

-- name: CanFlushCommits :one
-- CanFlushCommits reports whether the session may run FlushCommits (the
-- function is PUBLIC unless revoked).
SELECT /* jobqueue:no-table */ has_function_privilege('pg_logical_emit_message(boolean,text,text)', 'EXECUTE');

-- name: InsertJobsJSON :execrows
-- InsertJobsJSON inserts every job of a JSON array of objects in one
-- statement (one parameter, so no placeholder limit).
INSERT INTO jobs (name, type, payload, status, attempts, max_attempts, base_delay,
                  max_delay, scheduled_at, expires_at, created_at)
SELECT r.name, r.type, r.payload::jsonb, 'pending', 0, r.max_attempts, r.base_delay,
       r.max_delay, r.scheduled_at, r.expires_at, @created_at
FROM jsonb_to_recordset(sqlc.arg(rows)::jsonb) AS r(name text, type text, payload text,
     max_attempts int, base_delay int, max_delay int, scheduled_at timestamp,
     expires_at timestamp, ord int)
ORDER BY r.ord;

-- name: InsertJobsJSONReturning :many
-- InsertJobsJSONReturning is InsertJobsJSON that returns the new ids: the
-- single Enqueues of several callers written together (the enqueue
-- combiner, queue/enqueue_combine.go). One statement takes its ids from
-- the sequence in the order it inserts the rows, which is r.ord's, so the
-- ids sorted ascending are the rows' in r.ord order.
INSERT INTO jobs (name, type, payload, status, attempts, max_attempts, base_delay,
                  max_delay, scheduled_at, expires_at, created_at)
SELECT r.name, r.type, r.payload::jsonb, 'pending', 0, r.max_attempts, r.base_delay,
       r.max_delay, r.scheduled_at, r.expires_at, @created_at
FROM jsonb_to_recordset(sqlc.arg(rows)::jsonb) AS r(name text, type text, payload text,
     max_attempts int, base_delay int, max_delay int, scheduled_at timestamp,
     expires_at timestamp, ord int)
ORDER BY r.ord
RETURNING id;

-- name: InsertJobsJSONNotify :execrows
-- InsertJobsJSONNotify is InsertJobsJSON that also notifies @notify_type
-- (the jobs' type; empty when they have several). The materialized CTE
-- holds one row and runs pg_notify once, whatever the plan; the chunks of
-- one call share the caller's transaction, so their notifications arrive
-- as one.
WITH notified AS MATERIALIZED (
    SELECT pg_notify(sqlc.arg(channel)::text, sqlc.arg(notify_type)::text))
INSERT INTO jobs (name, type, payload, status, attempts, max_attempts, base_delay,
                  max_delay, scheduled_at, expires_at, created_at)
SELECT r.name, r.type, r.payload::jsonb, 'pending', 0, r.max_attempts, r.base_delay,
       r.max_delay, r.scheduled_at, r.expires_at, @created_at
FROM jsonb_to_recordset(sqlc.arg(rows)::jsonb) AS r(name text, type text, payload text,
     max_attempts int, base_delay int, max_delay int, scheduled_at timestamp,
     expires_at timestamp, ord int)
     CROSS JOIN notified
ORDER BY r.ord;

-- name: NotifyTypes :exec
-- NotifyTypes notifies each type of a JSON array of types (the queue sends
-- it after the enqueues it committed itself). It names no table (the
-- channel is a parameter), and says so to the table rewriting.
SELECT /* jobqueue:no-table */ pg_notify(sqlc.arg(channel)::text, t.value)
FROM jsonb_array_elements_text(sqlc.arg(types)::jsonb) AS t(value);

-- name: LockClaims :exec
-- LockClaims makes the busy claims of one table take turns: a claim session
-- sends it before its claim, in the claim's transaction (one pipeline, one
-- round trip), after a claim that took all it asked for
-- (queue/store_postgres_claim.go). @key names the table; the lock is
-- released at the claim's commit. It names no table, and says so to the
-- table rewriting.
SELECT /* jobqueue:no-table */ pg_advisory_xact_lock(hashtextextended(sqlc.arg(key)::text, 0));

-- name: ClaimJobs :many
-- ClaimJobs claims due jobs of every type (index status_scheduled);
-- ClaimJobsOfType and ClaimJobsOfTypes below are the same claim for one
-- type (index type_status_scheduled) and for the types of a JSON array.
-- Three statements, not one whose filter is a parameter: claimers plan
-- them once, without the parameters' values (queue/store_postgres_claim.go),
-- and a generic plan that kept all three candidate queries, each behind a
-- one-time filter, set up all three at every execution (30-50 µs more per
-- claim of an idle worker, half of that claim's server time).
--
-- The UPDATE writes the claim token of the attempt it starts,
-- attemptToken(batch token, id) of queue/attempt.go, spelled here as
-- sqlc.arg(token)::text || '-' || id::text (TestClaimTokenFormat checks it
-- against the Go function for each statement). The candidates start after
-- (sqlc.arg(after_at), sqlc.arg(after_id)) in (scheduled_at, id) order: a
-- claimer's watermark (queue/claim_cursor.go), or the year 1 and id 0 to
-- scan from the start. The row comparison is part of the index condition,
-- so a claim past the watermark does not read the entries before it (dead
-- ones pile up there while a transaction keeps vacuum from removing them).
-- The UPDATE finds the claimed rows by primary key (id = ANY (ARRAY(…)), as
-- the statements of attempts below): with `id IN (…)` the planner joined
-- them to a sequential scan of the whole table once it had statistics (a
-- hash semi join), which made a claim's cost grow with the table, completed
-- rows included, and the generic plan of id IN (…) did the same whatever
-- the statistics.
UPDATE jobs
SET status = 'in_progress', attempts = attempts + 1,
    claim_token = sqlc.arg(token)::text || '-' || id::text, lease_until = @lease_until
WHERE id = ANY (ARRAY(
    SELECT j.id FROM jobs j
    WHERE j.status = 'pending' AND j.scheduled_at <= @now
      AND (j.scheduled_at, j.id) > (sqlc.arg(after_at)::timestamptz, sqlc.arg(after_id)::bigint)
      AND (j.expires_at IS NULL OR j.expires_at > @now)
    ORDER BY j.scheduled_at, j.id
    LIMIT @max_jobs
    FOR UPDATE SKIP LOCKED))
RETURNING *;

-- name: ClaimJobsOfType :many
-- ClaimJobsOfType is ClaimJobs for the jobs of one type.
UPDATE jobs
SET status = 'in_progress', attempts = attempts + 1,
    claim_token = sqlc.arg(token)::text || '-' || id::text, lease_until = @lease_until
WHERE id = ANY (ARRAY(
    SELECT j.id FROM jobs j
    WHERE j.type = sqlc.arg(type)::text
      AND j.status = 'pending' AND j.scheduled_at <= @now
      AND (j.scheduled_at, j.id) > (sqlc.arg(after_at)::timestamptz, sqlc.arg(after_id)::bigint)
      AND (j.expires_at IS NULL OR j.expires_at > @now)
    ORDER BY j.scheduled_at, j.id
    LIMIT @max_jobs
    FOR UPDATE SKIP LOCKED))
RETURNING *;

-- name: ClaimJobsOfTypes :many
-- ClaimJobsOfTypes is ClaimJobs for the jobs of the types of the JSON array
-- types.
UPDATE jobs
SET status = 'in_progress', attempts = attempts + 1,
    claim_token = sqlc.arg(token)::text || '-' || id::text, lease_until = @lease_until
WHERE id = ANY (ARRAY(
    SELECT j.id FROM jobs j
    WHERE j.type IN (SELECT jsonb_array_elements_text((sqlc.arg(types)::text)::jsonb))
      AND j.status = 'pending' AND j.scheduled_at <= @now
      AND (j.scheduled_at, j.id) > (sqlc.arg(after_at)::timestamptz, sqlc.arg(after_id)::bigint)
      AND (j.expires_at IS NULL OR j.expires_at > @now)
    ORDER BY j.scheduled_at, j.id
    LIMIT @max_jobs
    FOR UPDATE SKIP LOCKED))
RETURNING *;

-- The statements of attempts (ExtendLeases, CompleteJobs,
-- DeleteCompletedJobs, SelectHeldAttempts, EndAttempts) find their rows by primary key
-- (id = ANY (ARRAY(…)), which the planner turns into a primary key lookup
-- even on a table without statistics) and fence them by claim_token. They
-- need no status test: a row has a claim token only while in_progress
-- (every statement that ends an attempt clears it), and a status test would
-- tempt the planner into scanning the status index.

-- name: ExtendLeases :many
-- ExtendLeases extends the leases of the attempts given as a JSON object
-- of token by id ({"<id>": "<token>", …}) and returns the ids that still
-- held their job.
--
-- The statements a worker runs all the time (ExtendLeases, CompleteJobs,
-- DeleteCompletedJobs) take the attempts as that object: each row is
-- matched with its own token by a lookup in it (jsonb keeps an object's
-- keys sorted), where `claim_token = ANY (tokens)` compared every row with
-- every token of the batch (a batch of 300 cost 45 000 comparisons).
--
-- It waits for a row another transaction holds locked at most
-- @lock_wait_ms milliseconds, as CompleteJobs does: timed out by the
-- client instead, it kept the rows it had locked before the held one until
-- pgx's cancel request landed, and the renewal sent again at once leaving
-- locked rows alone (ExtendLeasesSkipLocked) skipped them too.
UPDATE jobs
SET lease_until = @lease_until
WHERE id = ANY (ARRAY(
    SELECT jsonb_object_keys(sqlc.arg(tokens)::jsonb)::bigint
    WHERE set_config('lock_timeout', LEAST(NULLIF(extract(epoch FROM current_setting('lock_timeout')::interval) * 1000, 0),
        sqlc.arg(lock_wait_ms)::bigint)::bigint::text, true) IS NOT NULL))
  AND claim_token = (sqlc.arg(tokens)::jsonb ->> id::text)
RETURNING id;

-- name: ExtendLeasesSkipLocked :many
-- ExtendLeasesSkipLocked is ExtendLeases that leaves alone, rather than
-- waits for, the rows another transaction holds locked: the heartbeat's
-- retry of a renewal that ran out of time (queue/heartbeat.go), so that one
-- job whose row an application's transaction holds does not keep the other
-- attempts of the worker from renewing their leases. The rows it skipped
-- are not returned; the queue tells them from lost attempts by reading them
-- (SelectHeldAttempts).
UPDATE jobs
SET lease_until = @lease_until
WHERE id IN (
    SELECT l.id FROM jobs l
    WHERE l.id = ANY (ARRAY(SELECT jsonb_object_keys(sqlc.arg(tokens)::jsonb)::bigint))
      AND l.claim_token = (sqlc.arg(tokens)::jsonb ->> l.id::text)
    FOR UPDATE SKIP LOCKED)
RETURNING id;

-- name: CompleteJobs :many
-- CompleteJobs waits for a row another transaction holds locked at most
-- @lock_wait_ms milliseconds (or the session's lock_timeout, when it is
-- shorter): the set_config, evaluated once before any row is read (a
-- one-time filter of the subquery that lists the ids), sets lock_timeout
-- for the statement's own transaction. The server then ends the wait
-- (SQLSTATE 55P03) and rolls the statement back, freeing at once the rows
-- it had locked before the held one; the completer writes the batch again
-- leaving locked rows alone (CompleteJobsSkipLocked). A statement that the
-- client's timeout ended instead kept those rows until pgx's cancel
-- request landed (never, with no cancel requests, behind PgBouncer), so
-- that they were skipped, and given up, with the held one. ExtendLeases and
-- DeleteCompletedJobs spell the same bound out (sqlc shares no SQL between
-- statements, a function would be a schema change, and a separate SET a
-- round trip): TestPgLockBoundIsOneRule keeps the three copies one rule.
UPDATE jobs
SET status = 'completed', finished_at = @now, claim_token = NULL, lease_until = NULL
WHERE id = ANY (ARRAY(
    SELECT jsonb_object_keys(sqlc.arg(tokens)::jsonb)::bigint
    WHERE set_config('lock_timeout', LEAST(NULLIF(extract(epoch FROM current_setting('lock_timeout')::interval) * 1000, 0),
        sqlc.arg(lock_wait_ms)::bigint)::bigint::text, true) IS NOT NULL))
  AND claim_token = (sqlc.arg(tokens)::jsonb ->> id::text)
RETURNING id;

-- name: DeleteCompletedJobs :many
-- DeleteCompletedJobs waits for a locked row as CompleteJobs does.
DELETE FROM jobs
WHERE id = ANY (ARRAY(
    SELECT jsonb_object_keys(sqlc.arg(tokens)::jsonb)::bigint
    WHERE set_config('lock_timeout', LEAST(NULLIF(extract(epoch FROM current_setting('lock_timeout')::interval) * 1000, 0),
        sqlc.arg(lock_wait_ms)::bigint)::bigint::text, true) IS NOT NULL))
  AND claim_token = (sqlc.arg(tokens)::jsonb ->> id::text)
RETURNING id;

-- name: CompleteJobsSkipLocked :many
-- CompleteJobsSkipLocked is CompleteJobs that leaves alone, rather than
-- waits for, the rows another transaction holds locked: the completer's
-- retry of a batch whose CompleteJobs ran out of time (queue/completer.go),
-- so that one job whose row an application's transaction holds does not
-- keep the rest of its batch from completing. The rows it skipped are not
-- returned; the queue tells them from stale attempts by reading them
-- (SelectHeldAttempts).
UPDATE jobs
SET status = 'completed', finished_at = @now, claim_token = NULL, lease_until = NULL
WHERE id IN (
    SELECT l.id FROM jobs l
    WHERE l.id = ANY (ARRAY(SELECT jsonb_object_keys(sqlc.arg(tokens)::jsonb)::bigint))
      AND l.claim_token = (sqlc.arg(tokens)::jsonb ->> l.id::text)
    FOR UPDATE SKIP LOCKED)
RETURNING id;

-- name: DeleteCompletedJobsSkipLocked :many
-- DeleteCompletedJobsSkipLocked is DeleteCompletedJobs that leaves alone
-- the rows another transaction holds locked (see CompleteJobsSkipLocked).
DELETE FROM jobs
WHERE id IN (
    SELECT l.id FROM jobs l
    WHERE l.id = ANY (ARRAY(SELECT jsonb_object_keys(sqlc.arg(tokens)::jsonb)::bigint))
      AND l.claim_token = (sqlc.arg(tokens)::jsonb ->> l.id::text)
    FOR UPDATE SKIP LOCKED)
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
WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(ids)::jsonb)::bigint))
  AND claim_token = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(tokens)::jsonb)));

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
    scheduled_at = COALESCE(sqlc.narg(retry_at)::timestamp, scheduled_at),
    finished_at = sqlc.narg(finished_at), claim_token = NULL, lease_until = NULL
WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(ids)::jsonb)::bigint))
  AND claim_token = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(tokens)::jsonb)))
RETURNING id;

-- name: UnclaimJobs :many
-- UnclaimJobs gives back attempts that were claimed but never started (a
-- worker's buffered jobs that the shutdown cut off before an executor
-- took them, queue/shutdown.go): each job is pending again as it was
-- before its claim, its attempt not counted, its scheduled_at and error
-- kept.
UPDATE jobs
SET status = 'pending', attempts = attempts - 1, claim_token = NULL, lease_until = NULL
WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(ids)::jsonb)::bigint))
  AND claim_token = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(tokens)::jsonb)))
  AND status = 'in_progress'
RETURNING id;

-- name: SelectClaimBatch :many
-- SelectClaimBatch reads the attempts that the claim of the batch token
-- @batch started and that still hold their jobs: their tokens are
-- attemptToken(batch, id), @batch || '-' || id (ClaimJobs). A claim whose
-- answer was lost with its connection may have committed all the same, and
-- its rows came back with the answer, if at all: the queue finds them here
-- and gives them back through UnclaimJobs (claimUnsure, queue/attempt.go).
-- It reads the in_progress entries of index status_scheduled, as many as
-- the attempts in flight, and only after such a loss.
SELECT id, claim_token FROM jobs
WHERE status = 'in_progress' AND starts_with(claim_token, sqlc.arg(batch)::text || '-');

-- name: EndAbandonedAttempts :execrows
-- EndAbandonedAttempts is EndAttempts for reclaimed attempts: only those
-- whose lease is still passed (a heartbeat may have come in between).
-- With untokened set, a NULL claim_token matches too: an in_progress job
-- that no attempt names (written by hand or by another client) is
-- abandoned as well once its lease passed, and Queue.Reclaim ends each
-- such job on its own.
UPDATE jobs
SET status = @status, error = @error,
    scheduled_at = COALESCE(sqlc.narg(retry_at)::timestamp, scheduled_at),
    finished_at = sqlc.narg(finished_at), claim_token = NULL, lease_until = NULL
WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(ids)::jsonb)::bigint))
  AND (claim_token = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(tokens)::jsonb)))
    OR (claim_token IS NULL AND sqlc.arg(untokened)::boolean))
  AND status = 'in_progress' AND lease_until < @now;

-- name: FailJob :execrows
-- FailJob records one failed attempt as the queue decided.
UPDATE jobs
SET status = @status, error = @error,
    scheduled_at = COALESCE(sqlc.narg(retry_at)::timestamp, scheduled_at),
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
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status)::text)
  AND (sqlc.narg(type)::text IS NULL OR type = sqlc.narg(type)::text)
  AND (sqlc.narg(name)::text IS NULL OR name = sqlc.narg(name)::text)
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
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status)::text)
ORDER BY id DESC
LIMIT @max_rows;

-- name: JobIDBelow :many
-- JobIDBelow is the largest id below @before_id, if any: one step of the
-- primary key.
SELECT id FROM jobs WHERE id < @before_id ORDER BY id DESC LIMIT 1;

-- name: GetJob :many
SELECT * FROM jobs WHERE id = @id;

-- name: RetryCandidate :many
-- RetryCandidate reads what Retry decides on (queue/retry.go), locked
-- until the transaction ends.
SELECT status, expires_at FROM jobs WHERE id = @id FOR UPDATE;

-- name: RetryJob :execrows
-- RetryJob writes what Retry decided, fenced by the status it read.
UPDATE jobs
SET status = 'pending', attempts = 0, error = NULL, finished_at = NULL,
    claim_token = NULL, lease_until = NULL, scheduled_at = @now,
    expires_at = sqlc.narg(expires_at)
WHERE id = @id AND status = @read_status;

-- name: ExpireOverdue :execrows
-- ExpireOverdue expires one bounded batch of overdue pending jobs (at most
-- max_rows, skipping rows a claim holds); Queue.ExpireOverdue repeats it.
UPDATE jobs
SET status = 'expired', finished_at = @now
WHERE id IN (
    SELECT j.id FROM jobs j
    WHERE j.status = 'pending' AND j.expires_at <= @now
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED);

-- name: PruneFinished :execrows
-- PruneFinished deletes one bounded batch. FOR UPDATE makes the inner
-- conditions be checked again on the row as it is when locked, so that a
-- job retried meanwhile is kept.
DELETE FROM jobs
WHERE id IN (
    SELECT j.id FROM jobs j
    WHERE j.status IN ('completed', 'failed', 'expired') AND j.finished_at < @cutoff
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED);

-- name: AnalyzeTable :exec
-- AnalyzeTable gives a new table planner statistics before autovacuum
-- does: without them the planner sorts every pending job for each claim
-- instead of reading the status_scheduled index in order.
ANALYZE jobs;

-- name: PurgeJobs :execrows
-- PurgeJobs deletes every job, whatever its status (Queue.Purge).
DELETE FROM jobs;

-- name: ListenJobs :exec
-- ListenJobs makes the session LISTEN on the channel named like the table
-- (the rewriting of `jobs` turns it into LISTEN "<table>"). The worker runs
-- it on one dedicated connection (queue/notify_postgres.go).
LISTEN jobs;

-- name: ServerReadOnly :one
-- ServerReadOnly reports whether the session's server accepts no writes:
-- a standby, or a primary fenced with default_transaction_read_only (after
-- a failover the old primary may be kept up so, still accepting
-- connections): the test target_session_attrs=read-write makes. The LISTEN
-- session checks it when it starts and every pgListenCheckEvery
-- (queue/notify_postgres.go): a listener on such a server hears no enqueue,
-- so it listens again through the pool. It names no table.
SELECT /* jobqueue:no-table */ current_setting('transaction_read_only') = 'on' AS read_only;

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
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'pending' LIMIT @max_rows) a)::bigint AS pending,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'in_progress' LIMIT @max_rows) b)::bigint AS in_progress,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'completed' LIMIT @max_rows) c)::bigint AS completed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'failed' LIMIT @max_rows) d)::bigint AS failed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.status = 'expired' LIMIT @max_rows) e)::bigint AS expired;

-- name: CountStatusesOfTypeUpTo :one
-- CountStatusesOfTypeUpTo is CountStatusesUpTo for one type (index
-- type_status_scheduled).
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'pending' LIMIT @max_rows) a)::bigint AS pending,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'in_progress' LIMIT @max_rows) b)::bigint AS in_progress,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'completed' LIMIT @max_rows) c)::bigint AS completed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'failed' LIMIT @max_rows) d)::bigint AS failed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.type = @type AND j.status = 'expired' LIMIT @max_rows) e)::bigint AS expired;

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

-- name: CancelJobs :many
-- CancelJobs ends the pending and in_progress jobs among the ids with the
-- outcome the queue decides (status, error, finished_at), clearing the
-- claim token of a running attempt so that the attempt is fenced off, and
-- returns the ids it changed with their type, and the status and
-- lease_until each row had when this statement changed it (the queue
-- decides from them who counts a cancelled attempt: cancelCountedHere).
-- The rows are locked by the CTE (FOR UPDATE re-reads a row changed
-- meanwhile), so the old values are those of the row version updated.
WITH c AS (
    SELECT j.id, j.status, j.lease_until FROM jobs AS j
    WHERE j.id = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(ids)::jsonb)::bigint))
      AND j.status IN ('pending', 'in_progress')
    ORDER BY j.id
    FOR UPDATE
)
UPDATE jobs
SET status = @status, error = @error, finished_at = @finished_at,
    claim_token = NULL, lease_until = NULL
FROM c
WHERE jobs.id = c.id AND jobs.status IN ('pending', 'in_progress')
RETURNING jobs.id, jobs.type, c.status AS old_status, c.lease_until AS old_lease_until;

-- name: DeleteJobs :many
-- DeleteJobs deletes the jobs among the ids that are not in_progress and
-- returns the ids it deleted.
DELETE FROM jobs
WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(ids)::jsonb)::bigint))
  AND status <> 'in_progress'
RETURNING id;

-- name: JobStatuses :many
-- JobStatuses reads the status of the jobs among the ids (to tell the ids
-- that a control statement left alone: missing, finished or running).
SELECT id, status FROM jobs
WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(ids)::jsonb)::bigint));

-- Unique jobs (queue/unique.go): the side table jobs_unique holds one row
-- per job enqueued with a key; the unique index on live_key lets one job
-- hold a key at a time. The queue decides in Go whether a holder is still
-- live (its job pending or in_progress, or UniqueFor's period running).

-- name: ProbeUnique :many
SELECT job_id, unique_key, live_key, held_until FROM jobs_unique LIMIT 0;

-- name: InsertUniqueJob :many
-- InsertUniqueJob takes the key for a new job and inserts the job, in one
-- statement: the key row gets the job's id from the table's sequence, and
-- the job is inserted only if the key row was (no row returned: another
-- job holds the key, and nothing was written). @table_name is the quoted
-- table name, for pg_get_serial_sequence.
WITH k AS (
    INSERT INTO jobs_unique (job_id, unique_key, live_key, held_until)
    VALUES (nextval(pg_get_serial_sequence(sqlc.arg(table_name)::text, 'id')),
            sqlc.arg(unique_key)::text, sqlc.arg(unique_key)::text, sqlc.arg(held_until)::timestamp)
    ON CONFLICT (live_key) DO NOTHING
    RETURNING job_id)
INSERT INTO jobs (id, name, type, payload, status, attempts, max_attempts, base_delay,
                  max_delay, scheduled_at, expires_at, created_at)
SELECT k.job_id, sqlc.arg(name)::text, sqlc.arg(type)::text, sqlc.arg(payload)::jsonb, 'pending', 0,
       sqlc.arg(max_attempts)::int, sqlc.arg(base_delay)::int, sqlc.arg(max_delay)::int,
       sqlc.arg(scheduled_at)::timestamp, sqlc.narg(expires_at)::timestamp, sqlc.arg(created_at)::timestamp
FROM k
RETURNING id;

-- name: KeyHolder :many
-- KeyHolder is the row that holds a key.
SELECT job_id, held_until FROM jobs_unique WHERE live_key = @unique_key;

-- name: KeyHolderForUpdate :many
-- KeyHolderForUpdate is KeyHolder, locked until the transaction ends.
SELECT job_id, held_until FROM jobs_unique WHERE live_key = @unique_key FOR UPDATE;

-- name: HolderStatus :many
SELECT status FROM jobs WHERE id = @id;

-- name: TransactionIsolation :one
-- TransactionIsolation is the isolation level of the transaction it runs
-- in (a caller's, for a keyed EnqueueTx: at READ COMMITTED each statement
-- reads the latest committed rows). It names no table.
SELECT /* jobqueue:no-table */ current_setting('transaction_isolation')::text AS isolation;

-- name: HolderStatusForShare :many
-- HolderStatusForShare is HolderStatus, the job's row locked against
-- changes (Retry) until the transaction ends.
SELECT status FROM jobs WHERE id = @id FOR SHARE;

-- name: FreeKey :exec
-- FreeKey lets a job's key go (its job is no longer live).
UPDATE jobs_unique SET live_key = NULL WHERE job_id = @job_id;

-- name: JobKeyForUpdate :many
-- JobKeyForUpdate is the key row of a job, locked (Retry).
SELECT unique_key, live_key, held_until FROM jobs_unique WHERE job_id = @job_id FOR UPDATE;

-- name: RetakeKey :execrows
-- RetakeKey makes a job hold its key again (Retry).
UPDATE jobs_unique SET live_key = unique_key WHERE job_id = @job_id AND live_key IS NULL;

-- name: DeleteKeys :exec
-- DeleteKeys deletes the key rows of jobs (Delete).
DELETE FROM jobs_unique
WHERE job_id = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(ids)::jsonb)::bigint));

-- name: KeyWindow :one
-- KeyWindow reads the window of at most @max_rows key rows after job_id
-- @after in job_id order, which one maintenance pass examines for orphans
-- (DeleteOrphanKeys): how many rows it holds and its last job_id (0: none).
-- It reads those rows of the primary key only, never the whole key table.
SELECT COUNT(*) AS seen, CAST(COALESCE(MAX(w.job_id), 0) AS BIGINT) AS last_id
FROM (SELECT u.job_id FROM jobs_unique u WHERE u.job_id > @after ORDER BY u.job_id LIMIT @max_rows) AS w;

-- name: DeleteOrphanKeys :execrows
-- DeleteOrphanKeys deletes the key rows of a window read by KeyWindow
-- (job_id in (@after, @last_id]) whose job is gone (Prune, and jobs deleted
-- on success): such a key is free already. A key whose job exists is never
-- deleted.
DELETE FROM jobs_unique u
WHERE u.job_id > @after AND u.job_id <= @last_id
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = u.job_id);

-- The leader's lease (queue/leader.go) lives in the side table jobs_leader
-- and is timed by the database server's clock, so that every process
-- compares it against one clock: now is statement_timestamp() in UTC.

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
VALUES (@name, @periodic, @tick_nanos, @next_nanos, TIMESTAMP '1970-01-01 00:00:00', TIMESTAMP '1970-01-01 00:00:00', TIMESTAMP '1970-01-01 00:00:00')
ON CONFLICT (name) DO UPDATE SET term = EXCLUDED.term, renewals = EXCLUDED.renewals;

-- name: EnsureLeaderRow :exec
-- EnsureLeaderRow creates the role's row, held by nobody, if it is missing.
INSERT INTO jobs_leader (name, holder, term, renewals, since, renewed_at, lease_until)
VALUES (@name, '', 0, 0, TIMESTAMP '1970-01-01 00:00:00', TIMESTAMP '1970-01-01 00:00:00', TIMESTAMP '1970-01-01 00:00:00')
ON CONFLICT (name) DO NOTHING;

-- name: AcquireLeader :execrows
-- AcquireLeader takes the role for holder for lease_seconds from now when
-- its lease has passed, or renews it when holder holds it; one row changed
-- means holder leads (renewals changes every time, so that MySQL, which
-- counts only rows whose values changed, counts the row). A new term (and since) starts whenever the lease had
-- passed, even for the same holder.
UPDATE jobs_leader
SET term = CASE WHEN holder = @holder AND lease_until >= (statement_timestamp() AT TIME ZONE 'UTC')
        THEN term ELSE term + 1 END,
    since = CASE WHEN holder = @holder AND lease_until >= (statement_timestamp() AT TIME ZONE 'UTC')
        THEN since ELSE (statement_timestamp() AT TIME ZONE 'UTC') END,
    holder = @holder,
    renewals = renewals + 1,
    renewed_at = (statement_timestamp() AT TIME ZONE 'UTC'),
    lease_until = (statement_timestamp() AT TIME ZONE 'UTC') + CAST(@lease_seconds AS float8) * INTERVAL '1 second'
WHERE name = @name
  AND (holder = @holder OR lease_until < (statement_timestamp() AT TIME ZONE 'UTC'));

-- name: ReleaseLeader :execrows
-- ReleaseLeader ends holder's lease now, so that another process takes the
-- role at once.
UPDATE jobs_leader
SET lease_until = (statement_timestamp() AT TIME ZONE 'UTC')
WHERE name = @name AND holder = @holder
  AND lease_until > (statement_timestamp() AT TIME ZONE 'UTC');

-- name: GetLeader :one
-- GetLeader reads the role's row and the server's time.
SELECT holder, term, since, renewed_at, lease_until,
    (statement_timestamp() AT TIME ZONE 'UTC')::timestamp AS db_now
FROM jobs_leader
WHERE name = @name;

-- name: FenceLeaderAct :many
-- FenceLeaderAct is the first statement of each act of a leader, in the
-- act's transaction (queue/fence.go): it returns the role's fence row
-- (fence_name) only while holder holds the role (name) in term with a
-- lease that has not passed, and the fence row names the same holder and
-- term, and locks the fence row FOR SHARE until the transaction ends, so
-- that a takeover, which writes the fence row (SetLeaderFence), waits for
-- the act to end. The role's row is read, not locked: the leader's own
-- renewal (AcquireLeader) writes it and must not wait for its acts. It
-- sets idle_in_transaction_session_timeout to idle_ms for the transaction,
-- so that a process paused inside its act (SIGSTOP) loses its session, and
-- the act rolls back, instead of holding the takeover up. It returns the
-- server's time too (db_now), which bounds a periodic tick the act
-- enqueues (queue/periodic_clock.go) without a round trip of its own.
SELECT f.term, set_config('idle_in_transaction_session_timeout', CAST(@idle_ms AS text), true) AS idle,
    (statement_timestamp() AT TIME ZONE 'UTC')::timestamp AS db_now
FROM jobs_leader f
JOIN jobs_leader l ON l.name = @name AND l.holder = f.holder AND l.term = f.term
    AND l.lease_until > (statement_timestamp() AT TIME ZONE 'UTC')
WHERE f.name = @fence_name AND f.holder = @holder AND f.term = @term
FOR SHARE OF f;

-- name: LeaderFenceBehind :many
-- LeaderFenceBehind returns the role's term when its fence row
-- (fence_name) does not name the role's holder and term (or is missing):
-- after a takeover, in the takeover's transaction, which then moves the
-- fence row on (SetLeaderFence). A plain read: a renewal, whose fence row
-- is up to date, waits for no act.
SELECT l.term
FROM jobs_leader l
WHERE l.name = @name AND l.holder = @holder
  AND NOT EXISTS (
    SELECT 1 FROM jobs_leader f
    WHERE f.name = @fence_name AND f.holder = l.holder AND f.term = l.term);

-- name: SetLeaderFence :exec
-- SetLeaderFence makes the role's fence row (fence_name) name holder and
-- term, creating it if missing (a table installed before it existed). It
-- waits for the acts in flight, which hold the row FOR SHARE
-- (FenceLeaderAct): an act of an earlier term commits before the new term
-- can act, or is refused.
INSERT INTO jobs_leader (name, holder, term, renewals, since, renewed_at, lease_until)
VALUES (@fence_name, @holder, @term, 0, (statement_timestamp() AT TIME ZONE 'UTC'),
    TIMESTAMP '1970-01-01 00:00:00', TIMESTAMP '1970-01-01 00:00:00')
ON CONFLICT (name) DO UPDATE
SET holder = EXCLUDED.holder, term = EXCLUDED.term, renewals = jobs_leader.renewals + 1,
    since = EXCLUDED.since;
