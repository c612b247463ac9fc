-- memoryd schema, version 8: extraction jobs (raw turns → memories, issue 5).
--
-- A Write with turns queues a job; a worker (in the server, FOR UPDATE SKIP LOCKED, so any
-- number of replicas share the work) asks the extraction model for memory items, filters,
-- normalises and writes them. The turns are as sensitive as memories: they are stored only
-- sealed with the subject's data key (AAD bound to the job id, field 'turns'), and deleted
-- (set NULL) as soon as the job succeeds or fails — memoryd keeps memories, not transcripts.

CREATE TABLE extraction_jobs (
    tenant_id       text        NOT NULL,
    id              uuid        NOT NULL,
    subject         text        NOT NULL,
    agent           text        NOT NULL,            -- the agent that queued it; its view applies at run time
    state           text        NOT NULL DEFAULT 'queued'
                                CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    turns_ct        bytea,                           -- the sealed turns; NULL once the job has finished
    turn_count      integer     NOT NULL CHECK (turn_count > 0),
    attempts        integer     NOT NULL DEFAULT 0,
    -- When a queued job is due; for a running job, when its worker's lease runs out (a job
    -- whose worker died is then claimed again).
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    error           text        NOT NULL DEFAULT '',
    results         jsonb       NOT NULL DEFAULT '[]',
    dropped         jsonb       NOT NULL DEFAULT '{}',
    request_id      text        NOT NULL DEFAULT '',
    trace_id        text        NOT NULL DEFAULT '',
    view_version    bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    PRIMARY KEY (tenant_id, id),
    CHECK (state IN ('queued', 'running') OR turns_ct IS NULL)
);
CREATE INDEX extraction_jobs_due ON extraction_jobs (next_attempt_at) WHERE state IN ('queued', 'running');
CREATE INDEX extraction_jobs_subject ON extraction_jobs (tenant_id, subject);

-- Per-tenant pipeline counters (extraction parse failures, jobs, dropped items by reason),
-- for metrics to read.
CREATE TABLE pipeline_counts (
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
    FOREACH t IN ARRAY ARRAY['extraction_jobs', 'pipeline_counts']
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

-- The worker role claims due jobs across tenants (ids and states only: it cannot open the
-- sealed turns, having no access to subject_keys); everything else runs as memoryd_app with
-- the job's tenant set.
GRANT SELECT (tenant_id, id, state, attempts, next_attempt_at, started_at), UPDATE (state, attempts, next_attempt_at, started_at)
    ON extraction_jobs TO memoryd_worker;
CREATE POLICY jobs_worker ON extraction_jobs TO memoryd_worker USING (true) WITH CHECK (true);
