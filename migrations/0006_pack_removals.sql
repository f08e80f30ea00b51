-- npub-server schema, migration 6: pack removals under way (issue #31, a frozen object store).
--
-- APPEND-ONLY, like 0001..0005. Same portability rules. Twin: postgres/0006_pack_removals.sql.
--
-- A pack is put into the store before the version that names it commits, outside every lock
-- (a store that never answers must not hold the database's write lock). A removal of a pack no
-- version names (a deleted version's, an orphan's) therefore first records itself here, in a
-- transaction that also checks that nothing names the pack; an upload whose row would name a
-- pack being removed sees the row in its own transaction, waits for the removal, and puts the
-- pack again. The row goes once the object is gone; a row older than its time to live (its
-- remover died) is ignored. server/src/store/gc.rs has the protocol.
CREATE TABLE pack_removals (
    sha256      TEXT    PRIMARY KEY,
    started_at  INTEGER NOT NULL                  -- unix ms
);
