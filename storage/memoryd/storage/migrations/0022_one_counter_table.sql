-- memoryd schema, version 22: one table of counters.
--
-- Version 9 added lifecycle_counts beside version 8's pipeline_counts: the same columns, key
-- and row level security, written by two bump functions kept in step by hand. Every counter
-- now lives in pipeline_counts (storage/_counters.py), under the names it had; the names of
-- the two tables never overlapped, but a name in both would be added up, not lost.
--
-- pipeline_counts keeps its row level security, policy and grants: memoryd_app may SELECT,
-- INSERT, UPDATE and DELETE its tenant's rows, memoryd_worker nothing. That covers what
-- memoryd_app had on lifecycle_counts (SELECT, INSERT, UPDATE) and grants no one more.
--
-- The owner reads and writes every tenant's rows for this one statement (row level security
-- is forced again before the transaction commits).
--
-- lifecycle_counts itself stays, unused by this version, so servers of an older version keep
-- working beside migrated ones during a rolling upgrade (they still write there; what they
-- count after this migration is not carried over). A later version drops it, once no server
-- older than this one can be running.
ALTER TABLE lifecycle_counts NO FORCE ROW LEVEL SECURITY;
ALTER TABLE pipeline_counts NO FORCE ROW LEVEL SECURITY;
INSERT INTO pipeline_counts AS c (tenant_id, name, value, updated_at)
SELECT tenant_id, name, value, updated_at FROM lifecycle_counts
ON CONFLICT (tenant_id, name) DO UPDATE
    SET value = c.value + EXCLUDED.value, updated_at = GREATEST(c.updated_at, EXCLUDED.updated_at);
ALTER TABLE pipeline_counts FORCE ROW LEVEL SECURITY;
ALTER TABLE lifecycle_counts FORCE ROW LEVEL SECURITY;
