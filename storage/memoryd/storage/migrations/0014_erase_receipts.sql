-- memoryd schema, version 14: an erase's receipt commits with the erase.
--
-- The erasure log row is now written in the PURGE's (or FORGET's) own transaction, with the
-- erased memory ids and a digest of the request, so a process dying after the commit loses
-- no receipt: the client's retry of the same request (same agent, subject, selector, mode
-- and reason) finds nothing left to erase and is answered with that receipt. What the
-- check after the commit found (vector index cleared and read back, rows gone) is a second
-- row here, in erasure_checks: the log itself stays append-only for memoryd_app.
ALTER TABLE erasure_log ADD COLUMN request_digest bytea;
ALTER TABLE erasure_log ADD COLUMN memory_ids uuid[] NOT NULL DEFAULT '{}';
CREATE INDEX erasure_log_replay ON erasure_log (tenant_id, agent, request_digest, started_at);

CREATE TABLE erasure_checks (
    tenant_id       text        NOT NULL,
    erase_id        uuid        NOT NULL,
    checked_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    verified        boolean     NOT NULL,
    vectors         bigint      NOT NULL DEFAULT 0,
    unchecked       text[]      NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, erase_id, checked_at),
    FOREIGN KEY (tenant_id, erase_id) REFERENCES erasure_log (tenant_id, erase_id)
);
ALTER TABLE erasure_checks ENABLE ROW LEVEL SECURITY;
ALTER TABLE erasure_checks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON erasure_checks
    USING (tenant_id = current_setting('memoryd.tenant', true))
    WITH CHECK (tenant_id = current_setting('memoryd.tenant', true));
GRANT SELECT, INSERT ON erasure_checks TO memoryd_app;
