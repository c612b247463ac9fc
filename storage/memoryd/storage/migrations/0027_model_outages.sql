-- memoryd schema, version 27: a model outage delays extraction jobs, never loses them.
--
-- A job whose model cannot be reached, times out or is overloaded goes back to the queue to
-- wait (its turns still sealed in its row) until the model answers, or until the retry
-- horizon has passed since its first outage (`waiting_since`); those waits are counted
-- apart (`outages`), so they do not use up the attempts other failures have.
--
-- extraction_breakers: one row per model endpoint (a hash of its URL, as extraction_slots),
-- shared by every replica. After `failures` consecutive outage answers the breaker opens:
-- no job is claimed for the endpoint until `open_until`, so queued jobs stay queued instead
-- of being sent to a dead model; then one job is let through, and an answer closes it. No
-- tenant data; only memoryd_worker touches it.
ALTER TABLE extraction_jobs
    ADD COLUMN waiting_since timestamptz,
    ADD COLUMN outages integer NOT NULL DEFAULT 0;
GRANT SELECT (waiting_since) ON extraction_jobs TO memoryd_worker;

CREATE TABLE extraction_breakers (
    endpoint    text        PRIMARY KEY,
    failures    integer     NOT NULL DEFAULT 0,   -- consecutive outage answers
    openings    integer     NOT NULL DEFAULT 0,   -- times it opened since it last closed: the cool-down grows
    open_until  timestamptz NOT NULL DEFAULT '-infinity'
);
ALTER TABLE extraction_breakers ENABLE ROW LEVEL SECURITY;
ALTER TABLE extraction_breakers FORCE ROW LEVEL SECURITY;
CREATE POLICY extraction_breakers_worker ON extraction_breakers TO memoryd_worker USING (true) WITH CHECK (true);
GRANT SELECT, INSERT, UPDATE ON extraction_breakers TO memoryd_worker;
