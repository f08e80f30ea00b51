-- npub-server schema, migration 5 (PostgreSQL twin of ../0005_key_secrets.sql).
--
-- APPEND-ONLY like the SQLite file it mirrors; same translation as 0001 (INTEGER -> BIGINT,
-- BLOB -> BYTEA). The seeds of the signing and root keys, each sealed with AES-256-GCM under the
-- replicas' key-encryption key (server/src/key_store.rs), so that every replica signs with the
-- same keys and follows a rotation made through another.
CREATE TABLE key_secrets (
    name        TEXT    PRIMARY KEY,             -- a signing key id, or 'root-' || root key id
    sealed      BYTEA   NOT NULL,                -- nonce (12) || ciphertext (32) || tag (16)
    created_at  BIGINT  NOT NULL
);
