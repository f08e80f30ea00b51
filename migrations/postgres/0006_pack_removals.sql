-- npub-server schema, migration 6 (PostgreSQL twin of ../0006_pack_removals.sql): pack removals
-- under way. APPEND-ONLY.
CREATE TABLE pack_removals (
    sha256      TEXT    PRIMARY KEY,
    started_at  BIGINT  NOT NULL
);
