-- npub-server schema, migration 5: secret keys kept in the database (issue #16, shared keys).
--
-- APPEND-ONLY, like 0001..0004. Same portability rules: INTEGER unix milliseconds, no
-- SQLite-only functions. Twin: postgres/0005_key_secrets.sql.
--
-- Used only when the server is given a key-encryption key (--key-encryption-key, required with
-- a postgres:// database): then the signing keys' and the root key's seeds live here instead of
-- in <data-dir>/keys/, so that every replica signs with the same keys and follows a rotation
-- made through another. Each row is sealed with AES-256-GCM under that key, which the database
-- never sees (server/src/key_store.rs has the layout). Never updated, never deleted: a retired
-- key's secret stays, like its row in signing_keys.
CREATE TABLE key_secrets (
    name        TEXT    PRIMARY KEY,             -- a signing key id, or 'root-' || root key id
    sealed      BLOB    NOT NULL,                -- nonce (12) || ciphertext (32) || tag (16)
    created_at  INTEGER NOT NULL
);
