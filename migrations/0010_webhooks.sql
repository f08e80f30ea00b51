-- npub-server schema, migration 10: webhooks and their delivery queue (issue 36, item 4), and the
-- device event log kept with a status report (item 5, at the end).
--
-- APPEND-ONLY, like 0001..0009. Same portability rules: INTEGER unix milliseconds, no
-- SQLite-only functions. Twin: postgres/0010_webhooks.sql.
--
-- A webhook is a URL with the event kinds it wants; its signing secret is stored sealed
-- (server/src/ops/webhooks/secret.rs), never in the clear. An event is queued as one
-- webhook_deliveries row per webhook that wants it, in the transaction of the change that caused
-- it (an outbox): a delivery exists exactly when its change committed, and survives a restart.
-- The background sender (server/src/ops/webhooks/sender.rs) sends each webhook's pending rows
-- oldest first, one at a time, and writes every attempt's outcome back to the row.
CREATE TABLE webhooks (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused
    url                  TEXT    NOT NULL,
    events               TEXT    NOT NULL,            -- the kinds, comma-separated
    description          TEXT    NOT NULL DEFAULT '',
    secret_sealed        BLOB    NOT NULL,            -- nonce (12) || ciphertext (32) || tag (16)
    created_at           INTEGER NOT NULL,
    created_by           TEXT    NOT NULL,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,  -- failed attempts since the last success
    next_attempt_at      INTEGER NOT NULL DEFAULT 0,  -- the endpoint's backoff after a failure
    lease_until          INTEGER NOT NULL DEFAULT 0,  -- a replica is sending to it until then
    disabled_at          INTEGER,                     -- set after too many failed attempts
    disabled_reason      TEXT
);

CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused
    webhook_id      INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    message_id      TEXT    NOT NULL,                 -- the webhook-id header, the same on every retry
    event           TEXT    NOT NULL,
    payload         TEXT    NOT NULL,                 -- the exact body that is signed and sent
    created_at      INTEGER NOT NULL,
    state           TEXT    NOT NULL,                 -- pending, delivered, failed, dropped
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_attempt_at INTEGER,
    last_status     INTEGER,                          -- the receiver's HTTP status, if it answered
    last_error      TEXT,
    delivered_at    INTEGER
);
-- The sender's "oldest pending of this webhook", the queue bound's count, and the delivery log
-- (newest first, by id).
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (webhook_id, state, id);
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (webhook_id, id);

-- Issue 36, item 5: the device's own event log, sent with a status report (a few hundred bytes at
-- most: server/src/device/routes.rs bounds it), kept with the report's history row as a JSON array
-- of strings. NULL when the report carried none.
ALTER TABLE device_events ADD COLUMN agent_log TEXT;
