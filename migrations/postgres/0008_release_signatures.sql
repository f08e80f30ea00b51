-- npub-server schema, migration 8 (PostgreSQL twin of ../0008_release_signatures.sql): release
-- signatures. APPEND-ONLY.
ALTER TABLE versions ADD COLUMN release_bundle BYTEA;
ALTER TABLE models ADD COLUMN release_required BIGINT NOT NULL DEFAULT 0;
