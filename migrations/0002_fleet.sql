-- npub-server schema, migration 2: the fleet (devices, deployments, the deployment sequence).
--
-- APPEND-ONLY, like 0001: never edit once applied; changes go in a new file.
-- Same portability rules as 0001: INTEGER unix milliseconds, no SQLite-only functions.

-- The fleet-wide deployment sequence: one row, only ever incremented, in the same transaction
-- that inserts the deployment taking the value. Never reused, never lowered, survives restarts.
CREATE TABLE fleet_sequence (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    value  INTEGER NOT NULL CHECK (value >= 0)
);
INSERT INTO fleet_sequence (id, value) VALUES (1, 0);

-- Bumped by every transaction that changes what devices are offered (devices, deployments,
-- batches). A replica compares it with the generation its in-memory cache was built from and
-- rebuilds when they differ (server/src/fleet/poll_cache.rs).
CREATE TABLE fleet_generation (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    value  INTEGER NOT NULL
);
INSERT INTO fleet_generation (id, value) VALUES (1, 0);

-- Devices. Only the SHA-256 of a device token is stored (shown once at provisioning); device
-- tokens live apart from operator tokens so that neither can authorise the other's routes.
CREATE TABLE devices (
    id                 TEXT    PRIMARY KEY,        -- operator-chosen, e.g. a serial number
    name               TEXT    NOT NULL,
    hw_class           INTEGER NOT NULL CHECK (hw_class > 0),
    accel              INTEGER NOT NULL,           -- NPU1 accel word of the device's NPU
    grp                TEXT    NOT NULL,
    tags               TEXT    NOT NULL,           -- JSON array of strings
    token_hash         TEXT    NOT NULL UNIQUE,
    created_at         INTEGER NOT NULL,
    created_by         INTEGER NOT NULL REFERENCES tokens (id),
    revoked_at         INTEGER,
    last_seen          INTEGER,                    -- batched: see fleet/last_seen.rs
    current_sequence   INTEGER NOT NULL DEFAULT 0, -- of the last deployment reported installed
    current_version_id INTEGER REFERENCES versions (id),
    last_state         TEXT,
    last_reason        TEXT,
    last_status_at     INTEGER
);
CREATE INDEX devices_by_group ON devices (grp);

-- Deployments: one pack (version) to a group or a single device, with a staged rollout.
-- ON DELETE RESTRICT on version_id is what makes deleting a deployed version a 409.
CREATE TABLE deployments (
    id                INTEGER PRIMARY KEY,
    sequence          INTEGER NOT NULL UNIQUE,
    version_id        INTEGER NOT NULL REFERENCES versions (id) ON DELETE RESTRICT,
    target_group      TEXT,
    target_device     TEXT REFERENCES devices (id),
    kind              TEXT    NOT NULL CHECK (kind IN ('deploy', 'rollback')),
    batches           TEXT    NOT NULL,            -- JSON array of cumulative percentages
    success_threshold REAL    NOT NULL,
    failure_threshold REAL    NOT NULL,
    open_batches      INTEGER NOT NULL,            -- batches offered so far (1..=len)
    state             TEXT    NOT NULL CHECK (state IN ('active', 'paused', 'aborted')),
    abort_reason      TEXT,
    created_at        INTEGER NOT NULL,
    created_by        INTEGER NOT NULL REFERENCES tokens (id),
    CHECK ((target_group IS NULL) <> (target_device IS NULL))
);

-- The signed manifest of a deployment for one hardware class (280 bytes, npub_core::manifest).
CREATE TABLE deployment_manifests (
    deployment_id INTEGER NOT NULL REFERENCES deployments (id),
    hw_class      INTEGER NOT NULL,
    key_id        TEXT    NOT NULL,
    manifest      BLOB    NOT NULL,
    PRIMARY KEY (deployment_id, hw_class)
);

-- What each device last reported for a deployment.
CREATE TABLE device_deployments (
    deployment_id INTEGER NOT NULL REFERENCES deployments (id),
    device_id     TEXT    NOT NULL REFERENCES devices (id),
    state         TEXT    NOT NULL CHECK (state IN ('downloading', 'verified', 'installed', 'bound', 'failed', 'rolled_back')),
    progress      REAL,
    reason        TEXT,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (deployment_id, device_id)
);
