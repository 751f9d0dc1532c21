-- The version 2 jobs table on PostgreSQL (SPEC section 2). sqlc reads this file
-- to type the queries; migrations/ builds the same DDL for the table chosen at
-- run time, and a test checks that the two agree.
CREATE TABLE jobs (
    id           BIGSERIAL PRIMARY KEY,
    name         VARCHAR(255) NOT NULL,
    type         VARCHAR(64)  NOT NULL DEFAULT 'default',
    payload      JSONB        NOT NULL,
    status       VARCHAR(20)  NOT NULL DEFAULT 'pending',
    attempts     INT          NOT NULL DEFAULT 0,
    claim_token  VARCHAR(64)  NULL,
    lease_until  TIMESTAMP    NULL,
    max_attempts INT          NOT NULL,
    base_delay   INT          NOT NULL,
    max_delay    INT          NOT NULL,
    error        TEXT         NULL,
    scheduled_at TIMESTAMP    NOT NULL,
    expires_at   TIMESTAMP    NULL,
    finished_at  TIMESTAMP    NULL,
    created_at   TIMESTAMP    NOT NULL
);

CREATE INDEX idx_jobs_status_scheduled ON jobs (status, scheduled_at, id);
CREATE INDEX idx_jobs_type_status_scheduled ON jobs (type, status, scheduled_at, id);
CREATE INDEX idx_jobs_status_expires ON jobs (status, expires_at);
CREATE INDEX idx_jobs_lease_until ON jobs (lease_until);

-- The side table of unique keys, <table>_unique (internal/ddl builds it for
-- the table chosen at run time): one row per job enqueued with a key.
CREATE TABLE jobs_unique (
    job_id     BIGINT       PRIMARY KEY,
    unique_key VARCHAR(255) NOT NULL,
    live_key   VARCHAR(255) NULL,
    held_until TIMESTAMP    NOT NULL
);

CREATE UNIQUE INDEX idx_jobs_unique_live_key ON jobs_unique (live_key);

-- jobs_leader is the side table <table>_leader (internal/ddl/sidetables.go):
-- who holds each role among the processes of the table (queue/leader.go).
CREATE TABLE jobs_leader (
    name        VARCHAR(64)  PRIMARY KEY,
    holder      VARCHAR(255) NOT NULL,
    term        BIGINT       NOT NULL,
    renewals    BIGINT       NOT NULL,
    since       TIMESTAMP    NOT NULL,
    renewed_at  TIMESTAMP    NOT NULL,
    lease_until TIMESTAMP    NOT NULL
);
