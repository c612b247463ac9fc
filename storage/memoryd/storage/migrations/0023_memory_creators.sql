-- memoryd schema, version 23: a memory knows which agent created it.
--
-- The lifecycle's episodic cap evicts, per subject, the least valuable events and decisions of
-- each writer over the cap. It counted by `agent`, the memory's last writer, and a merged
-- repeat makes the repeater the last writer: an agent without erase rights could repeat
-- another agent's event and then flood the subject until the cap evicted it (issue 37). The
-- cap counts by `created_by`, which no later change of the memory moves. Existing rows take
-- the agent of their first version (the one that created them), else their last writer; a
-- row inserted by a server of the version before (a rolling upgrade) has none, and the cap
-- reads its last writer instead.
ALTER TABLE memories ADD COLUMN created_by text;

-- The owner fills every tenant's rows: row level security is lifted for this statement only
-- (the migration's own transaction holds the table's lock throughout).
ALTER TABLE memories NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_versions NO FORCE ROW LEVEL SECURITY;
UPDATE memories m SET created_by = COALESCE(
    (SELECT v.agent FROM memory_versions v WHERE v.tenant_id = m.tenant_id AND v.memory_id = m.id
     ORDER BY v.version LIMIT 1),
    m.agent);
ALTER TABLE memory_versions FORCE ROW LEVEL SECURITY;
ALTER TABLE memories FORCE ROW LEVEL SECURITY;
