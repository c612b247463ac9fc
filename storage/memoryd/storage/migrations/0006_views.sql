-- memoryd schema, version 6: per-agent views.
--
-- A view says what one agent of a tenant may read, write and erase, and which fields of a
-- memory it receives. Every change is a new row: the current view of an agent is its row
-- with the highest version, unless that row is a deletion (definition NULL), in which case
-- the agent has no view and is denied everything. Rows are never updated or deleted by the
-- application, so the table is the view's full history.

CREATE TABLE agent_views (
    tenant_id       text        NOT NULL,
    agent           text        NOT NULL,
    version         bigint      NOT NULL CHECK (version > 0),
    definition      jsonb,                           -- NULL: the view was deleted
    changed_by      text        NOT NULL,
    changed_at      timestamptz NOT NULL DEFAULT now(),
    request_id      text        NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_id, agent, version)
);

ALTER TABLE agent_views ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_views FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_views
    USING (tenant_id = current_setting('memoryd.tenant', true))
    WITH CHECK (tenant_id = current_setting('memoryd.tenant', true));
GRANT SELECT, INSERT ON agent_views TO memoryd_app;
