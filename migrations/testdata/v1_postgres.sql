-- The version 1 jobs table on PostgreSQL (SPEC section 4), as the first
-- release created it. {{table}} is replaced by the test's table name.
CREATE TABLE "{{table}}" (
    id           BIGSERIAL PRIMARY KEY,
    name         VARCHAR(255) NOT NULL,
    type         VARCHAR(64)  NOT NULL DEFAULT 'default',
    payload      JSONB        NOT NULL,
    status       VARCHAR(20)  NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'in_progress', 'completed', 'failed')),
    retry_count  INT          NOT NULL DEFAULT 0,
    error        TEXT         NULL,
    scheduled_at TIMESTAMP    NOT NULL DEFAULT (NOW() AT TIME ZONE 'UTC'),
    locked_at    TIMESTAMP    NULL,
    expires_at   TIMESTAMP    NULL,
    created_at   TIMESTAMP    NOT NULL DEFAULT (NOW() AT TIME ZONE 'UTC')
);
CREATE INDEX "idx_{{table}}_status_scheduled" ON "{{table}}" (status, scheduled_at);
CREATE INDEX "idx_{{table}}_type" ON "{{table}}" (type);
CREATE INDEX "idx_{{table}}_locked_at" ON "{{table}}" (locked_at);
