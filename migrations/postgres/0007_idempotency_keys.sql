-- npub-server schema, migration 7 (PostgreSQL twin of ../0007_idempotency_keys.sql):
-- Idempotency-Key. APPEND-ONLY.
CREATE TABLE idempotency_keys (
    scope         TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    fingerprint   TEXT,
    status        BIGINT,
    content_type  TEXT,
    location      TEXT,
    body          BYTEA,
    created_at    BIGINT  NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
