-- npub-server schema, migration 9: indexes for the paged, filtered listings (issue 36).
--
-- APPEND-ONLY, like 0001..0008. Same portability rules. Twin: postgres/0009_listing_indexes.sql.
--
-- Each listing pages by keyset on a unique key (server/src/http/page.rs) and each filter gets an
-- index that ends in that key, so that a filtered page reads its rows in order and stops at the
-- page's end instead of sorting everything that matches (server/src/fleet/listing.rs has the
-- table; server/tests/fleet/listing_plans.rs asks both backends for their plans).
-- (grp, id) serves every query (grp) served, and pages a group in id order.
DROP INDEX devices_by_group;
CREATE INDEX devices_by_group_id ON devices (grp, id);
CREATE INDEX devices_by_state ON devices (last_state, id);
CREATE INDEX devices_by_version ON devices (current_version_id, id);
CREATE INDEX devices_by_accel ON devices (accel, id);
-- "Not seen for N minutes": a device that never polled counts from when it was provisioned.
CREATE INDEX devices_by_seen ON devices ((COALESCE(last_seen, created_at)));
CREATE INDEX audit_by_action ON audit (action, id);
CREATE INDEX audit_by_actor ON audit (actor, id);
CREATE INDEX audit_by_object ON audit (object, id);
CREATE INDEX audit_by_at ON audit (at);
