-- memoryd schema, version 4: resumable re-embedding into a new model's collection.
--
-- `memoryd reindex` records, per model and tenant, the last memory id it embedded, so an
-- interrupted run continues where it stopped. It runs as memoryd_worker (ids only).

CREATE TABLE reindex_progress (
    model_id        text        NOT NULL REFERENCES index_models (model_id) ON DELETE CASCADE,
    tenant_id       text        NOT NULL,
    last_id         uuid,
    done            boolean     NOT NULL DEFAULT false,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model_id, tenant_id)
);
ALTER TABLE reindex_progress ENABLE ROW LEVEL SECURITY;
ALTER TABLE reindex_progress FORCE ROW LEVEL SECURITY;
CREATE POLICY reindex_worker ON reindex_progress TO memoryd_worker USING (true) WITH CHECK (true);
GRANT SELECT, INSERT, UPDATE ON reindex_progress TO memoryd_worker;
