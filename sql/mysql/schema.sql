-- The version 2 jobs table on MySQL 8.0+ / MariaDB 10.6+ (SPEC section 2).
-- sqlc reads this file to type the queries; migrations/ builds the same DDL
-- for the table chosen at run time, and a test checks that the two agree.
CREATE TABLE jobs (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name         VARCHAR(255) NOT NULL,
    type         VARCHAR(64)  NOT NULL DEFAULT 'default',
    payload      JSON         NOT NULL,
    status       ENUM('pending','in_progress','completed','failed','expired') NOT NULL DEFAULT 'pending',
    attempts     INT UNSIGNED NOT NULL DEFAULT 0,
    claim_token  VARCHAR(64)  NULL,
    lease_until  DATETIME     NULL,
    max_attempts INT UNSIGNED NOT NULL,
    base_delay   INT UNSIGNED NOT NULL,
    max_delay    INT UNSIGNED NOT NULL,
    error        TEXT         NULL,
    scheduled_at DATETIME     NOT NULL,
    expires_at   DATETIME     NULL,
    finished_at  DATETIME     NULL,
    created_at   DATETIME     NOT NULL,
    INDEX idx_status_scheduled (status, scheduled_at, id),
    INDEX idx_type_status_scheduled (type, status, scheduled_at, id),
    INDEX idx_status_expires (status, expires_at),
    INDEX idx_lease_until (lease_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The side table of unique keys, <table>_unique (internal/ddl builds it for
-- the table chosen at run time): one row per job enqueued with a key.
CREATE TABLE jobs_unique (
    job_id     BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    unique_key VARCHAR(255)    NOT NULL,
    live_key   VARCHAR(255)    NULL,
    held_until DATETIME        NOT NULL,
    UNIQUE INDEX idx_live_key (live_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- jobs_leader is the side table <table>_leader (internal/ddl/sidetables.go):
-- who holds each role among the processes of the table (queue/leader.go).
CREATE TABLE jobs_leader (
    name        VARCHAR(64)  NOT NULL PRIMARY KEY,
    holder      VARCHAR(255) NOT NULL,
    term        BIGINT       NOT NULL,
    renewals    BIGINT       NOT NULL,
    since       DATETIME(6)  NOT NULL,
    renewed_at  DATETIME(6)  NOT NULL,
    lease_until DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
