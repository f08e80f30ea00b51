-- npub-server schema, migration 4: the root key and key revocation (issue #12, hole 4).
--
-- APPEND-ONLY, like 0001..0003. Same portability rules: INTEGER unix milliseconds, no
-- SQLite-only functions.
--
-- The rotation and revocation records themselves go into `keyring_updates` (0001), beside the
-- ones imported with a key: a device keeps one update sequence, so every record it may be sent
-- has to be numbered in one sequence, and one table with `sequence UNIQUE` is what makes that so.

-- The server's root key: signs keyring updates (NPK1 records), never manifests. Its secret is the
-- file keys/root-<key id>.key; exactly one row, written at the first start that finds none.
CREATE TABLE root_keys (
    id          INTEGER PRIMARY KEY,
    key_id      TEXT    NOT NULL UNIQUE,         -- npub_core::manifest::KeyId, 16 hex digits
    public_key  TEXT    NOT NULL,                -- 64 hex digits
    created_at  INTEGER NOT NULL
);

-- When a signing key was revoked (a Revoke or Replace record names it); NULL: never. A revoked
-- key is always retired as well.
ALTER TABLE signing_keys ADD COLUMN revoked_at INTEGER;
