-- npub-server schema, migration 12 (PostgreSQL twin of ../0012_proofs.sql): the proof against
-- the source model and the golden vector of each version. APPEND-ONLY.
ALTER TABLE versions ADD COLUMN proof_status TEXT
    CHECK (proof_status IN ('bit_exact', 'diverged', 'not_run'));
ALTER TABLE versions ADD COLUMN proof TEXT;
ALTER TABLE versions ADD COLUMN golden_input BYTEA;
ALTER TABLE versions ADD COLUMN golden_sha256 TEXT;
