-- npub-server schema, migration 3: each device's history (what it was offered, what it reported).
--
-- APPEND-ONLY, like 0001 and 0002. Same portability rules: INTEGER unix milliseconds, no
-- SQLite-only functions.

-- The first time a device was handed a deployment's manifest (a 200 on the manifest poll).
-- Written with the batched last-seen flush (server/src/fleet/last_seen.rs), so a poll still never
-- writes the database; the primary key makes a repeated offer a no-op.
CREATE TABLE device_offers (
    device_id     TEXT    NOT NULL REFERENCES devices (id),
    deployment_id INTEGER NOT NULL REFERENCES deployments (id),
    first_at      INTEGER NOT NULL,
    PRIMARY KEY (device_id, deployment_id)
);

-- A device's timeline, newest = highest id: one row per offer (kind 'offered') and per status
-- report (kind 'report'; consecutive 'downloading' reports for one deployment update one row, so
-- progress does not flood the timeline). Bounded per device by server/src/fleet/history.rs.
CREATE TABLE device_events (
    id            INTEGER PRIMARY KEY,
    device_id     TEXT    NOT NULL REFERENCES devices (id),
    deployment_id INTEGER NOT NULL REFERENCES deployments (id),
    kind          TEXT    NOT NULL CHECK (kind IN ('offered', 'report')),
    state         TEXT,
    progress      REAL,
    reason        TEXT,
    at            INTEGER NOT NULL
);
CREATE INDEX device_events_by_device ON device_events (device_id, id);
