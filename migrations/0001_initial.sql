-- npub-server schema, migration 1.
--
-- APPEND-ONLY: once a migration has been applied anywhere, it is never edited; a change is a new
-- file with the next number. sqlx records each applied migration's checksum and refuses to start
-- against a database whose history differs.
--
-- Portable on purpose (see server/src/db.rs, "Growth path: PostgreSQL"): timestamps are INTEGER
-- unix milliseconds, no SQLite-only functions, digests are lowercase hex TEXT.

-- Operator API tokens. Only the SHA-256 of the secret is stored; the secret is shown once.
-- A revoked token keeps its row so that the audit log can still name who did what.
CREATE TABLE tokens (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL,
    role        TEXT    NOT NULL CHECK (role IN ('admin', 'operator')),
    hash        TEXT    NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    created_by  INTEGER REFERENCES tokens (id),  -- NULL: the bootstrap token
    revoked_at  INTEGER
);

CREATE TABLE models (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    description TEXT    NOT NULL DEFAULT '',
    accelerator INTEGER,                         -- NPU1 accel word every version must carry; NULL: any
    created_at  INTEGER NOT NULL,
    created_by  INTEGER NOT NULL REFERENCES tokens (id)
);

-- One immutable pack per (model, version). Several versions may share a pack (same sha256): the
-- store keeps one copy, removed when the last version naming it is deleted.
-- Deployments (a later migration) reference versions (id) with a foreign key (plain or
-- ON DELETE RESTRICT): that is what turns DELETE of a deployed version into a 409.
CREATE TABLE versions (
    id            INTEGER PRIMARY KEY,
    model_id      INTEGER NOT NULL REFERENCES models (id),
    version       TEXT    NOT NULL,
    sha256        TEXT    NOT NULL,              -- of the pack: its name in the pack store
    size          INTEGER NOT NULL,              -- pack bytes (NPU1 total_bytes)
    checksum      INTEGER NOT NULL,              -- NPU1 header word 7
    accel         INTEGER NOT NULL,              -- NPU1 header word 6
    region_count  INTEGER NOT NULL,
    arena_bytes   INTEGER NOT NULL,              -- npub_core::arena_bytes_required
    source        TEXT    NOT NULL CHECK (source IN ('npub', 'tflite', 'npz')),
    source_sha256 TEXT    NOT NULL,              -- of the uploaded file (= sha256 for a .npub)
    source_size   INTEGER NOT NULL,
    io_bindings   TEXT,                          -- JSON; NULL when none were declared
    io_digest     TEXT,                          -- hex; NULL when none were declared
    report        TEXT    NOT NULL,              -- JSON: npub_core::inspect::report
    stream        TEXT    NOT NULL,              -- JSON: the command-stream verifier's summary
    created_at    INTEGER NOT NULL,
    created_by    INTEGER NOT NULL REFERENCES tokens (id),
    UNIQUE (model_id, version)
);
CREATE INDEX versions_by_sha256 ON versions (sha256);

-- Who did what to which object, and when. Written in the same transaction as the change.
CREATE TABLE audit (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    token_id  INTEGER REFERENCES tokens (id),    -- NULL: the server itself (first start)
    actor     TEXT    NOT NULL,                  -- the token's name at the time
    action    TEXT    NOT NULL,                  -- e.g. 'version.upload', 'token.revoke'
    object    TEXT    NOT NULL,                  -- e.g. 'models/kws/versions/1.0.0'
    detail    TEXT                               -- JSON
);

-- Manifest signing keys: the secret is a file under <data-dir>/keys/, never in the database.
-- Exactly one key is active (retired_at IS NULL).
CREATE TABLE signing_keys (
    id          INTEGER PRIMARY KEY,
    key_id      TEXT    NOT NULL UNIQUE,         -- npub_core::manifest::KeyId, 16 hex digits
    public_key  TEXT    NOT NULL,                -- 64 hex digits
    source      TEXT    NOT NULL CHECK (source IN ('generated', 'imported')),
    created_at  INTEGER NOT NULL,
    retired_at  INTEGER
);
CREATE UNIQUE INDEX signing_keys_one_active ON signing_keys ((retired_at IS NULL)) WHERE retired_at IS NULL;

-- Root-signed keyring updates (NPK1 records) imported with a key, for delivery to devices.
CREATE TABLE keyring_updates (
    id          INTEGER PRIMARY KEY,
    sequence    INTEGER NOT NULL UNIQUE,
    root_key_id TEXT    NOT NULL,
    record      BLOB    NOT NULL,                -- the 144-byte record, verbatim
    created_at  INTEGER NOT NULL,
    created_by  INTEGER NOT NULL REFERENCES tokens (id)
);
