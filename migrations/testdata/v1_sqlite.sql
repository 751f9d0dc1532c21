-- The version 1 jobs table on SQLite (SPEC section 4), as the first release
-- created it. Times are text; version 1 wrote them as 'YYYY-MM-DD HH:MM:SS'
-- (CURRENT_TIMESTAMP). {{table}} is replaced by the test's table name.
CREATE TABLE "{{table}}" (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         VARCHAR(255) NOT NULL,
    type         VARCHAR(64)  NOT NULL DEFAULT 'default',
    payload      TEXT         NOT NULL,
    status       VARCHAR(20)  NOT NULL DEFAULT 'pending' CHECK (status IN ('pending','in_progress','completed','failed')),
    retry_count  INTEGER      NOT NULL DEFAULT 0,
    error        TEXT,
    scheduled_at DATETIME     NOT NULL DEFAULT CURRENT_TIMESTAMP,
    locked_at    DATETIME,
    expires_at   DATETIME,
    created_at   DATETIME     NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX "idx_{{table}}_status_scheduled" ON "{{table}}" (status, scheduled_at);
CREATE INDEX "idx_{{table}}_type" ON "{{table}}" (type);
CREATE INDEX "idx_{{table}}_locked_at" ON "{{table}}" (locked_at);
