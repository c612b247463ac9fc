-- memoryd schema, version 28: a receipt the vector index could not confirm is checked again later.
--
-- A PURGE answered while the vector index was down (or whose read-back still found a vector)
-- has a receipt that is not verified although its rows are gone. Such an erase gets a row
-- here, in the check's transaction; a worker (memoryd_worker: ids only, across tenants, FOR
-- UPDATE SKIP LOCKED so two workers never re-check the same erase at once) takes it when due,
-- re-runs the vector check through the tenant's own session and adds its result to
-- erasure_checks (`recheck` true). The row goes once a check is verified; while the index
-- stays down it is due again later and later (`attempts`).
CREATE TABLE erasure_rechecks (
    tenant_id       text        NOT NULL,
    erase_id        uuid        NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    PRIMARY KEY (tenant_id, erase_id),
    FOREIGN KEY (tenant_id, erase_id) REFERENCES erasure_log (tenant_id, erase_id)
);
CREATE INDEX erasure_rechecks_due ON erasure_rechecks (next_attempt_at);
ALTER TABLE erasure_checks ADD COLUMN recheck boolean NOT NULL DEFAULT false;

-- Receipts logged before this version: a PURGE whose latest check is not verified, deleted
-- no vector and names `vector_store_files` is one whose index was unreachable (the rows
-- part is checked again by id). The owner reads every tenant's rows for this statement only.
ALTER TABLE erasure_log NO FORCE ROW LEVEL SECURITY;
ALTER TABLE erasure_checks NO FORCE ROW LEVEL SECURITY;
INSERT INTO erasure_rechecks (tenant_id, erase_id)
SELECT l.tenant_id, l.erase_id FROM erasure_log l
JOIN LATERAL (SELECT c.verified, c.vectors, c.unchecked FROM erasure_checks c
              WHERE c.tenant_id = l.tenant_id AND c.erase_id = l.erase_id ORDER BY c.checked_at DESC LIMIT 1) c ON true
WHERE l.mode = 'purge' AND NOT c.verified AND c.vectors = 0 AND 'vector_store_files' = ANY(c.unchecked);
ALTER TABLE erasure_log FORCE ROW LEVEL SECURITY;
ALTER TABLE erasure_checks FORCE ROW LEVEL SECURITY;

ALTER TABLE erasure_rechecks ENABLE ROW LEVEL SECURITY;
ALTER TABLE erasure_rechecks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON erasure_rechecks
    USING (tenant_id = current_setting('memoryd.tenant', true))
    WITH CHECK (tenant_id = current_setting('memoryd.tenant', true));
CREATE POLICY erasure_rechecks_worker ON erasure_rechecks TO memoryd_worker USING (true) WITH CHECK (true);
GRANT SELECT, INSERT, DELETE ON erasure_rechecks TO memoryd_app;
GRANT SELECT, UPDATE, DELETE ON erasure_rechecks TO memoryd_worker;
