-- memoryd schema, version 1: the source of truth for memories.
--
-- Every table that holds tenant data has a tenant_id column and Row Level Security ENABLEd
-- and FORCEd, with one policy: rows are visible and writable only when tenant_id equals the
-- transaction's `memoryd.tenant` setting. The server runs as the non-owner role memoryd_app
-- and sets the tenant with SET LOCAL in every transaction; without it, nothing is visible.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'memoryd_app') THEN
        CREATE ROLE memoryd_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END
$$;

CREATE TABLE memories (
    tenant_id       text        NOT NULL,
    id              uuid        NOT NULL DEFAULT gen_random_uuid(),
    subject         text        NOT NULL,            -- '' for org-scoped memories
    scope           text        NOT NULL CHECK (scope IN ('subject', 'org', 'session')),
    session_id      text        NOT NULL DEFAULT '',
    category        text        NOT NULL CHECK (category IN
                        ('fact', 'preference', 'constraint', 'goal', 'context', 'event', 'decision')),
    key             text        NOT NULL DEFAULT '',
    text            text        NOT NULL,
    text_hash       bytea       NOT NULL,            -- digest of the normalised text, for dedup
    data            jsonb,
    importance      real        NOT NULL CHECK (importance BETWEEN 0 AND 1),
    confidence      real        NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    stability       text        NOT NULL CHECK (stability IN ('stable', 'transient')),
    pinned          boolean     NOT NULL DEFAULT false,
    tags            text[]      NOT NULL DEFAULT '{}',
    valid_from      timestamptz,
    valid_until     timestamptz,
    agent           text        NOT NULL,
    source_kind     text        NOT NULL CHECK (source_kind IN ('input', 'inference', 'sync')),
    source_turn_id  text        NOT NULL DEFAULT '',
    version         integer     NOT NULL DEFAULT 1,
    status          text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'forgotten')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    access_count    bigint      NOT NULL DEFAULT 0,
    last_access_at  timestamptz,
    PRIMARY KEY (tenant_id, id)
);
-- One current value per (owner, category, key) for the categories that replace values;
-- constraints accumulate and episodic memories have no key.
CREATE UNIQUE INDEX memories_current_key ON memories (tenant_id, subject, session_id, category, key)
    WHERE status = 'active' AND key <> '' AND category IN ('fact', 'preference', 'goal', 'context');
CREATE INDEX memories_listing ON memories (tenant_id, subject, updated_at DESC, id DESC);
CREATE INDEX memories_by_key ON memories (tenant_id, subject, key) WHERE key <> '';
CREATE INDEX memories_by_text ON memories (tenant_id, subject, category, text_hash);
CREATE INDEX memories_by_turn ON memories (tenant_id, subject, source_turn_id) WHERE source_turn_id <> '';

CREATE TABLE memory_versions (
    tenant_id       text        NOT NULL,
    memory_id       uuid        NOT NULL,
    version         integer     NOT NULL,
    change          text        NOT NULL CHECK (change IN ('created', 'updated', 'versioned', 'merged', 'forgotten')),
    subject         text        NOT NULL,
    scope           text        NOT NULL,
    session_id      text        NOT NULL,
    category        text        NOT NULL,
    key             text        NOT NULL,
    text            text        NOT NULL,
    data            jsonb,
    importance      real        NOT NULL,
    confidence      real        NOT NULL,
    stability       text        NOT NULL,
    pinned          boolean     NOT NULL,
    tags            text[]      NOT NULL,
    valid_from      timestamptz,
    valid_until     timestamptz,
    agent           text        NOT NULL,
    source_kind     text        NOT NULL,
    source_turn_id  text        NOT NULL,
    status          text        NOT NULL,
    created_at      timestamptz NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, memory_id, version)
);
CREATE INDEX memory_versions_subject ON memory_versions (tenant_id, subject);

-- Work for the vector index, written in the same transaction as the memory it is about and
-- consumed by the outbox worker (FOR UPDATE SKIP LOCKED). It carries ids only, no content.
CREATE TABLE outbox (
    tenant_id       text        NOT NULL,
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    memory_id       uuid        NOT NULL,
    subject         text        NOT NULL,
    op              text        NOT NULL CHECK (op IN ('upsert', 'delete')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    dead            boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX outbox_pending ON outbox (next_attempt_at) WHERE NOT dead;
CREATE INDEX outbox_memory ON outbox (tenant_id, memory_id);

CREATE TABLE audit_log (
    tenant_id       text        NOT NULL,
    seq             bigint      GENERATED ALWAYS AS IDENTITY,
    at              timestamptz NOT NULL DEFAULT now(),
    agent           text        NOT NULL,
    subject         text        NOT NULL,
    action          text        NOT NULL,
    memory_ids      uuid[]      NOT NULL DEFAULT '{}',
    request_id      text        NOT NULL DEFAULT '',
    trace_id        text        NOT NULL DEFAULT '',
    details         jsonb       NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, seq)
);

CREATE TABLE erasure_log (
    tenant_id       text        NOT NULL,
    erase_id        uuid        NOT NULL DEFAULT gen_random_uuid(),
    agent           text        NOT NULL,
    subject         text        NOT NULL,
    selector        jsonb       NOT NULL,
    mode            text        NOT NULL CHECK (mode IN ('forget', 'purge')),
    reason          text        NOT NULL DEFAULT '',
    counts          jsonb       NOT NULL,
    verified        boolean     NOT NULL,
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, erase_id)
);

-- A retried Write with the same key returns the stored response of the first one.
CREATE TABLE idempotency_keys (
    tenant_id       text        NOT NULL,
    agent           text        NOT NULL,
    key             text        NOT NULL,
    request_hash    bytea       NOT NULL,
    response        jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent, key)
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'memory_versions', 'outbox', 'audit_log', 'erasure_log',
                             'idempotency_keys']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_setting(''memoryd.tenant'', true)) '
            'WITH CHECK (tenant_id = current_setting(''memoryd.tenant'', true))', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO memoryd_app', t);
    END LOOP;
END
$$;

-- The audit and erasure logs are append-only for the application.
REVOKE UPDATE, DELETE ON audit_log, erasure_log FROM memoryd_app;
