-- memoryd schema, version 3: what the outbox worker needs to keep the vector index in step.
--
-- The worker claims index work across all tenants, so it runs as its own role,
-- memoryd_worker, which may read and settle outbox rows of every tenant (ids only — the
-- outbox carries no content) and record index routes. It reads memory rows as memoryd_app
-- with the tenant set, like every other read.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'memoryd_worker') THEN
        CREATE ROLE memoryd_worker LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END
$$;

GRANT SELECT, UPDATE, DELETE ON outbox TO memoryd_worker;
CREATE POLICY outbox_worker ON outbox TO memoryd_worker USING (true) WITH CHECK (true);

-- Which partition of which collection holds a tenant's vectors (partition routing mode), or
-- that the tenant lives in a partition-key collection.
CREATE TABLE index_routes (
    tenant_id       text        NOT NULL,
    collection      text        NOT NULL,
    partition_name  text        NOT NULL,
    mode            text        NOT NULL CHECK (mode IN ('partition', 'partition_key')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, collection)
);
ALTER TABLE index_routes ENABLE ROW LEVEL SECURITY;
ALTER TABLE index_routes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON index_routes
    USING (tenant_id = current_setting('memoryd.tenant', true))
    WITH CHECK (tenant_id = current_setting('memoryd.tenant', true));
CREATE POLICY routes_worker ON index_routes TO memoryd_worker USING (true) WITH CHECK (true);
GRANT SELECT ON index_routes TO memoryd_app;
GRANT SELECT, INSERT ON index_routes TO memoryd_worker;

-- The embedding models that have a collection, and which one Recall uses. No tenant data.
CREATE TABLE index_models (
    model_id        text        PRIMARY KEY,
    collection      text        NOT NULL,
    dim             integer     NOT NULL,
    active          boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    activated_at    timestamptz
);
CREATE UNIQUE INDEX index_models_one_active ON index_models (active) WHERE active;
GRANT SELECT ON index_models TO memoryd_app, memoryd_worker;
