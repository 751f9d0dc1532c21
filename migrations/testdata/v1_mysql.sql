-- The version 1 jobs table on MySQL/MariaDB (SPEC section 4), as the first
-- release created it: created_at is a TIMESTAMP (stored as an instant, shown
-- in the session's time zone), and the table has the server's default
-- utf8mb4 collation (case-insensitive). {{table}} is replaced by the test's
-- table name.
CREATE TABLE `{{table}}` (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name         VARCHAR(255) NOT NULL,
    type         VARCHAR(64)  NOT NULL DEFAULT 'default',
    payload      JSON         NOT NULL,
    status       ENUM('pending','in_progress','completed','failed') NOT NULL DEFAULT 'pending',
    retry_count  INT UNSIGNED NOT NULL DEFAULT 0,
    error        TEXT         NULL,
    scheduled_at DATETIME     NOT NULL,
    locked_at    DATETIME     NULL,
    expires_at   DATETIME     NULL,
    created_at   TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    INDEX idx_status_scheduled (status, scheduled_at),
    INDEX idx_type (type),
    INDEX idx_locked_at (locked_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
