-- The version 2 jobs table on SQLite 3.35+ (SPEC section 2). sqlc reads this
-- file to type the queries; migrations/ builds the same DDL for the table
-- chosen at run time, and a test checks that the two agree. sqlc's SQLite
-- parser rejects an explicit NULL constraint, so nullable columns have none.
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         VARCHAR(255) NOT NULL,
    type         VARCHAR(64)  NOT NULL DEFAULT 'default',
    payload      TEXT         NOT NULL,
    status       VARCHAR(20)  NOT NULL DEFAULT 'pending',
    attempts     INTEGER      NOT NULL DEFAULT 0,
    claim_token  VARCHAR(64),
    lease_until  DATETIME,
    max_attempts INTEGER      NOT NULL,
    base_delay   INTEGER      NOT NULL,
    max_delay    INTEGER      NOT NULL,
    error        TEXT,
    scheduled_at DATETIME     NOT NULL,
    expires_at   DATETIME,
    finished_at  DATETIME,
    created_at   DATETIME     NOT NULL
);

CREATE INDEX idx_jobs_status_scheduled ON jobs (status, scheduled_at, id);
CREATE INDEX idx_jobs_type_status_scheduled ON jobs (type, status, scheduled_at, id);
CREATE INDEX idx_jobs_status_expires ON jobs (status, expires_at);
CREATE INDEX idx_jobs_lease_until ON jobs (lease_until);

-- The side table of unique keys, <table>_unique (internal/ddl builds it for
-- the table chosen at run time): one row per job enqueued with a key.
CREATE TABLE jobs_unique (
    job_id     INTEGER      PRIMARY KEY,
    unique_key VARCHAR(255) NOT NULL,
    live_key   VARCHAR(255),
    held_until DATETIME     NOT NULL
);

CREATE UNIQUE INDEX idx_jobs_unique_live_key ON jobs_unique (live_key);

-- The view jobs_keyed (internal/ddl/sidetables.go, keyedView): an insert
-- into it inserts a job and its key row in one statement, through an
-- INSTEAD OF trigger that internal/ddl creates with it (not written here:
-- sqlc reads only the view's columns).
CREATE VIEW jobs_keyed AS
SELECT j.name, j.type, j.payload, j.max_attempts, j.base_delay, j.max_delay,
       j.scheduled_at, j.expires_at, j.created_at, u.unique_key, u.held_until
FROM jobs AS j JOIN jobs_unique AS u ON u.job_id = j.id;

-- jobs_leader is the side table <table>_leader (internal/ddl/sidetables.go):
-- who holds each role among the processes of the table (queue/leader.go).
CREATE TABLE jobs_leader (
    name        VARCHAR(64)  PRIMARY KEY NOT NULL,
    holder      VARCHAR(255) NOT NULL,
    term        INTEGER      NOT NULL,
    renewals    INTEGER      NOT NULL,
    since       DATETIME     NOT NULL,
    renewed_at  DATETIME     NOT NULL,
    lease_until DATETIME     NOT NULL
);
