-- npub-server schema, migration 15: when a deployment completed (issue 36).
--
-- APPEND-ONLY, like 0001..0014. Same portability rules. Twin: ../0015_deployment_completion.sql.

-- The first time every target of a deployment reported `installed` or `bound` with every batch
-- open and it was not aborted (the `completed` phase of its JSON), in unix ms; NULL: not yet.
-- Set once, in the transaction that queued the `deployment.completed` webhook event; never
-- cleared (a device that joins the group later does not "uncomplete" the record of it).
ALTER TABLE deployments ADD COLUMN completed_at BIGINT;
