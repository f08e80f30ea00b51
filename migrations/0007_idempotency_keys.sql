-- npub-server schema, migration 7: Idempotency-Key (issue #31, retried requests).
--
-- APPEND-ONLY, like 0001..0006. Same portability rules. Twin: postgres/0007_idempotency_keys.sql.
--
-- One row per key a client sent on a request that creates something (server/src/idempotency.rs
-- lists the routes): inserted when the first request with the key starts (fingerprint and
-- status NULL: still being answered), completed with its 2xx answer, deleted if it did not
-- succeed; a row older than 24 hours is gone. scope is the SHA-256 of the bearer token that sent
-- it, so that a key is one client's and never another's.
CREATE TABLE idempotency_keys (
    scope         TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    fingerprint   TEXT,                            -- SHA-256 hex of method, path and body
    status        INTEGER,
    content_type  TEXT,
    location      TEXT,
    body          BLOB,
    created_at    INTEGER NOT NULL,                -- unix ms
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
