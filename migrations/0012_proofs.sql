-- npub-server schema, migration 12: the proof that a version's pack computes what its source
-- model computes, and its golden vector (issue 37).
--
-- APPEND-ONLY, like 0001..0009. Same portability rules. Twin: postgres/0012_proofs.sql.
--
-- proof_status: NULL when the upload came without its source model; else 'bit_exact',
-- 'diverged' or 'not_run' (server/src/catalog/proof.rs). A deployment or rollback to a
-- 'diverged' version needs `override_proof`, audited.
ALTER TABLE versions ADD COLUMN proof_status TEXT
    CHECK (proof_status IN ('bit_exact', 'diverged', 'not_run'));
-- JSON: the status, the reason it was not run, npu_model::prove::Report.
ALTER TABLE versions ADD COLUMN proof TEXT;
-- The golden input (each model input's bytes, in the model's input order, concatenated) and the
-- SHA-256 (hex) of the outputs the functional model computes for it, concatenated the same way.
-- NULL when the functional model cannot run the pack (no IO bindings, an unsupported operation).
ALTER TABLE versions ADD COLUMN golden_input BLOB;
ALTER TABLE versions ADD COLUMN golden_sha256 TEXT;
