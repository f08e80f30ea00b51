-- npub-server schema, migration 16: which fleet generation last changed a device's ranking
-- (issue 36).
--
-- APPEND-ONLY, like 0001..0015. Same portability rules. Twin: postgres/0016_device_changes.sql.

-- The fleet generation the last change to what ranking reads of a device (provisioned, renamed,
-- moved, another accelerator, revoked) committed as: set by that write, in its transaction, to
-- `fleet_generation.value + 1` (server/src/fleet/ranking.rs says why that is the generation it
-- commits as). A deployment's ranked targets of an older generation are moved forward by the
-- rows stamped above it instead of ranking the whole group again. 0: not changed since this
-- migration (every ranking then is made from the rows).
ALTER TABLE devices ADD COLUMN changed_generation INTEGER NOT NULL DEFAULT 0;
CREATE INDEX devices_by_change ON devices (changed_generation);
