-- memoryd schema, version 9: the memory lifecycle and source trust.
--
-- expires_at: when a memory's time to live runs out (NULL: never — pinned memories,
-- categories without a TTL, and rows written before this version until their next change).
-- The lifecycle sweeper forgets active memories whose expires_at has passed; reads treat
-- them as gone at once.
-- trust: the trust level of the source kind that wrote the value (NULL for rows written
-- before this version: read as the default trust of their source kind).

ALTER TABLE memories ADD COLUMN expires_at timestamptz;
ALTER TABLE memories ADD COLUMN trust real CHECK (trust BETWEEN 0 AND 1);
ALTER TABLE memory_versions ADD COLUMN expires_at timestamptz;
ALTER TABLE memory_versions ADD COLUMN trust real;

-- The sweeper's scans: active memories by expiry, and by last use (stale forgetting).
CREATE INDEX memories_expiry ON memories (tenant_id, expires_at) WHERE status = 'active' AND expires_at IS NOT NULL;
CREATE INDEX memories_last_use ON memories (tenant_id, (GREATEST(updated_at, last_access_at)))
    WHERE status = 'active' AND NOT pinned;
CREATE INDEX memories_episodic ON memories (tenant_id, subject) WHERE status = 'active' AND category IN ('event', 'decision');

-- Values of a keyed memory written by a source trusted less than the current value's: kept
-- here, sealed like memory content (AAD: tenant, subject, pending id, 'pending_text' /
-- 'pending_data'), until a write of higher trust or ResolveConflict settles them. A purge
-- of the memory deletes them with it.
CREATE TABLE pending_values (
    tenant_id       text        NOT NULL,
    id              uuid        NOT NULL,
    memory_id       uuid        NOT NULL,
    subject         text        NOT NULL,            -- the memory's owner ('' for org-scoped)
    text_ct         bytea       NOT NULL,
    text_hash       bytea       NOT NULL,
    data_ct         bytea,
    importance      real        NOT NULL,
    confidence      real        NOT NULL,
    stability       text        NOT NULL,
    pinned          boolean     NOT NULL,
    tags            text[]      NOT NULL DEFAULT '{}',
    valid_from      timestamptz,
    valid_until     timestamptz,
    agent           text        NOT NULL,
    source_kind     text        NOT NULL CHECK (source_kind IN ('input', 'inference', 'sync')),
    source_turn_id  text        NOT NULL DEFAULT '',
    trust           real        NOT NULL CHECK (trust BETWEEN 0 AND 1),
    written_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, memory_id) REFERENCES memories (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX pending_values_memory ON pending_values (tenant_id, memory_id);

-- Lifecycle and conflict counters per tenant (lifecycle.expired, conflicts.pending, ...),
-- read by operators and metrics.
CREATE TABLE lifecycle_counts (
    tenant_id       text        NOT NULL,
    name            text        NOT NULL,
    value           bigint      NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['pending_values', 'lifecycle_counts']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_setting(''memoryd.tenant'', true)) '
            'WITH CHECK (tenant_id = current_setting(''memoryd.tenant'', true))', t);
    END LOOP;
END
$$;
GRANT SELECT, INSERT, DELETE ON pending_values TO memoryd_app;
GRANT SELECT, INSERT, UPDATE ON lifecycle_counts TO memoryd_app;
