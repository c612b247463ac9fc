-- memoryd schema, version 30: conversation sessions and the memories written in them (issue 43).
--
-- A Write with a session_id opens (or reopens) its session and links every memory its items
-- created, changed or merged into; an extraction job queued by such a Write links what it
-- writes when it runs. EndSession (or the tenant's idle timeout) ends a session: its snapshot
-- is made of memories (the summary a SCOPE_SESSION CONTEXT memory), so views, erasure, export
-- and audit apply to it as to any memory. These tables only say which memories belong to
-- which session and when it ended: no text, no key, nothing a view would mask.
CREATE TABLE sessions (
    tenant_id       text        NOT NULL,
    subject         text        NOT NULL,
    session_id      text        NOT NULL,
    agent           text        NOT NULL,            -- the last agent that wrote in it: the idle end uses its view
    started_at      timestamptz NOT NULL DEFAULT now(),
    last_active_at  timestamptz NOT NULL DEFAULT now(),
    ended_at        timestamptz,                     -- NULL while open
    expires_at      timestamptz,                     -- of the snapshot, once ended
    claimed_until   timestamptz,                     -- an idle sweep's lease on an open session
    PRIMARY KEY (tenant_id, subject, session_id)
);
-- The idle sweep: a tenant's open sessions, least recently active first; and its ended ones
-- whose snapshot expired (their rows go).
CREATE INDEX sessions_idle ON sessions (tenant_id, last_active_at) WHERE ended_at IS NULL;
CREATE INDEX sessions_expiry ON sessions (tenant_id, expires_at) WHERE ended_at IS NOT NULL;

CREATE TABLE session_memories (
    tenant_id       text        NOT NULL,
    subject         text        NOT NULL,
    session_id      text        NOT NULL,
    memory_id       uuid        NOT NULL,
    PRIMARY KEY (tenant_id, subject, session_id, memory_id),
    FOREIGN KEY (tenant_id, subject, session_id) REFERENCES sessions (tenant_id, subject, session_id)
        ON DELETE CASCADE,
    -- A purge by id takes its links with it.
    FOREIGN KEY (tenant_id, memory_id) REFERENCES memories (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX session_memories_memory ON session_memories (tenant_id, memory_id);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sessions', 'session_memories']
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

-- The worker role lists the tenants with open sessions or expired snapshots for the idle sweep
-- (tenant ids only); the sweep itself runs as memoryd_app with the tenant set.
GRANT SELECT (tenant_id, ended_at, expires_at) ON sessions TO memoryd_worker;
CREATE POLICY sessions_worker ON sessions TO memoryd_worker USING (true);

-- The job queued by a Write with a session_id links what it writes to that session.
ALTER TABLE extraction_jobs ADD COLUMN session_id text NOT NULL DEFAULT '';
