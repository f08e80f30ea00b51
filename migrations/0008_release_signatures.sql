-- npub-server schema, migration 8: release signatures (issue 34, docs/release.md).
--
-- APPEND-ONLY, like 0001..0007. Same portability rules. Twin: postgres/0008_release_signatures.sql.
--
-- A version's release signatures: the NPRB bundle (docs/release.md) exactly as devices are sent
-- it, at most 1,168 bytes; NULL while nobody released the version. A second upload merges into it.
-- Beside the version because it is the version's, and goes with it when the version is deleted.
ALTER TABLE versions ADD COLUMN release_bundle BLOB;

-- 1: a version of this model without enough release signatures can be stored but not deployed
-- (nor rolled back to). 0: as before.
ALTER TABLE models ADD COLUMN release_required INTEGER NOT NULL DEFAULT 0;

-- Release keyring records (NPK1 actions 4-8, signed offline by a release root) go into
-- keyring_updates (0001) with the server's own, in the one sequence devices follow.
