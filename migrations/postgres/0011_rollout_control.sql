-- npub-server schema, migration 11: the dashboard's aggregates and rollout control (issue 36).
--
-- APPEND-ONLY, like 0001..0009. Same portability rules. Twin: ../0011_rollout_control.sql.

-- What a deployment does when its failures exceed `failure_threshold`: abort it (as before), or
-- pause it. `acknowledged_failures`: the failures among its offered devices when an operator last
-- resumed it; a paused-on-threshold deployment pauses again only on a failure after that.
ALTER TABLE deployments ADD COLUMN on_failure TEXT NOT NULL DEFAULT 'abort'
    CHECK (on_failure IN ('abort', 'pause'));
ALTER TABLE deployments ADD COLUMN acknowledged_failures BIGINT NOT NULL DEFAULT 0;
-- A retry (`POST /api/v1/deployments/{id}/retry-failed`): the deployment it retries. Its targets
-- are the devices listed in `deployment_members`, within its group (or its one device).
ALTER TABLE deployments ADD COLUMN retry_of BIGINT REFERENCES deployments (id);
CREATE TABLE deployment_members (
    deployment_id BIGINT NOT NULL REFERENCES deployments (id),
    device_id     TEXT    NOT NULL REFERENCES devices (id),
    PRIMARY KEY (deployment_id, device_id)
);

-- A group's maintenance window: updates are offered to its devices only between `start_minute`
-- and `end_minute` (minutes after local midnight in `time_zone`, an IANA name; a window whose end
-- is before its start runs over midnight).
CREATE TABLE group_windows (
    grp          TEXT    PRIMARY KEY,
    start_minute BIGINT NOT NULL CHECK (start_minute >= 0 AND start_minute < 1440),
    end_minute   BIGINT NOT NULL CHECK (end_minute >= 0 AND end_minute < 1440),
    time_zone    TEXT    NOT NULL,
    updated_at   BIGINT NOT NULL
);

-- The dashboard (server/src/fleet/summary.rs): devices by status and by version are counted from
-- these indexes alone (covering), the active rollouts found by state, and a deployment's timeline
-- read in time order.
CREATE INDEX devices_by_revoked_state ON devices (revoked_at, last_state, last_reason);
CREATE INDEX devices_by_revoked_version ON devices (revoked_at, current_version_id);
-- Offline: the unrevoked devices not seen since an instant, a range within `revoked_at IS NULL`
-- (devices_by_seen alone would read every revoked device's row too, and SQLite prefers the
-- equality on revoked_at over it).
CREATE INDEX devices_by_revoked_seen ON devices (revoked_at, (COALESCE(last_seen, created_at)));
CREATE INDEX deployments_by_state ON deployments (state, sequence);
CREATE INDEX device_deployments_by_time ON device_deployments (deployment_id, updated_at, state);
