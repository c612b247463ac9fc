-- memoryd schema, version 17: BM25's collection statistics kept with the writes.
--
-- A keyword search scores with N (how many memories the caller may read) and the average
-- document length of those memories. Counting them on every query scanned the whole subject:
-- ~90 ms of a Recall on a subject of 100,000 memories. They are now kept per (tenant,
-- subject, scope, session, category) — the columns a read's visibility and a view's `*` rules
-- select on — as rows of changes (docs, length) that a trigger on memories appends in the
-- same transaction as the change itself: an insert, a status change, a new doc_len, a
-- purge. So they are exact at every snapshot, for every path that changes a memory, and a
-- rolled-back write counts nothing. Appending (never updating one row) means concurrent
-- writers never wait on each other here; a Write folds its subject's rows once there are
-- more than a few dozen, and the lifecycle sweep folds the rest (``_bm25``), so a read
-- sums a few rows per group.
--
-- The table holds counts and lengths only, never content: a subject's rows go when the
-- subject's last memory is purged.
CREATE TABLE keyword_stats (
    tenant_id       text        NOT NULL,
    subject         text        NOT NULL,            -- '' for org-scoped memories
    scope           text        NOT NULL,
    session_id      text        NOT NULL,
    category        text        NOT NULL,
    docs            bigint      NOT NULL,            -- change of the active memories' count
    length          bigint      NOT NULL             -- change of the sum of their doc_len
);
CREATE INDEX keyword_stats_group ON keyword_stats (tenant_id, subject, category, scope, session_id)
    INCLUDE (docs, length);

-- Active memories whose validity or TTL may have lapsed: a keyword search takes them out of
-- the kept counts (the sweep forgets expired ones within a minute; a lapsed valid_until stays).
CREATE INDEX memories_lapsing ON memories (tenant_id, subject, (LEAST(expires_at, valid_until)))
    WHERE status = 'active' AND (expires_at IS NOT NULL OR valid_until IS NOT NULL);

-- One row of change per memory whose counted state changed: a row trigger, so that the many
-- updates that change nothing counted (a Recall's access count, a re-encryption) are
-- filtered by the WHEN clauses without calling a function at all.
CREATE FUNCTION memories_keyword_stats() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was boolean := TG_OP <> 'INSERT' AND OLD.status = 'active';
    is_now boolean := TG_OP <> 'DELETE' AND NEW.status = 'active';
BEGIN
    IF was AND is_now AND (OLD.tenant_id, OLD.subject, OLD.scope, OLD.session_id, OLD.category)
                          = (NEW.tenant_id, NEW.subject, NEW.scope, NEW.session_id, NEW.category) THEN
        INSERT INTO keyword_stats (tenant_id, subject, scope, session_id, category, docs, length)
        VALUES (NEW.tenant_id, NEW.subject, NEW.scope, NEW.session_id, NEW.category, 0, NEW.doc_len - OLD.doc_len);
        RETURN NULL;
    END IF;
    IF was THEN
        INSERT INTO keyword_stats (tenant_id, subject, scope, session_id, category, docs, length)
        VALUES (OLD.tenant_id, OLD.subject, OLD.scope, OLD.session_id, OLD.category, -1, -OLD.doc_len);
    END IF;
    IF is_now THEN
        INSERT INTO keyword_stats (tenant_id, subject, scope, session_id, category, docs, length)
        VALUES (NEW.tenant_id, NEW.subject, NEW.scope, NEW.session_id, NEW.category, 1, NEW.doc_len);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_keyword_stats_insert AFTER INSERT ON memories
    FOR EACH ROW WHEN (NEW.status = 'active') EXECUTE FUNCTION memories_keyword_stats();
CREATE TRIGGER memories_keyword_stats_update AFTER UPDATE ON memories
    FOR EACH ROW WHEN ((OLD.status = 'active' OR NEW.status = 'active')
        AND (OLD.status, OLD.doc_len, OLD.tenant_id, OLD.subject, OLD.scope, OLD.session_id, OLD.category)
            IS DISTINCT FROM (NEW.status, NEW.doc_len, NEW.tenant_id, NEW.subject, NEW.scope, NEW.session_id, NEW.category))
    EXECUTE FUNCTION memories_keyword_stats();
CREATE TRIGGER memories_keyword_stats_delete AFTER DELETE ON memories
    FOR EACH ROW WHEN (OLD.status = 'active') EXECUTE FUNCTION memories_keyword_stats();

-- A purge: the groups it leaves with nothing are dropped, so no row names an erased subject.
CREATE FUNCTION memories_keyword_stats_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM keyword_stats k USING (
        SELECT s.tenant_id, s.subject, s.scope, s.session_id, s.category
        FROM keyword_stats s
        JOIN (SELECT DISTINCT tenant_id, subject, scope, session_id, category FROM gone) AS touched
          USING (tenant_id, subject, scope, session_id, category)
        GROUP BY 1, 2, 3, 4, 5 HAVING sum(s.docs) = 0 AND sum(s.length) = 0) AS empty
    WHERE (k.tenant_id, k.subject, k.scope, k.session_id, k.category)
        = (empty.tenant_id, empty.subject, empty.scope, empty.session_id, empty.category);
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_keyword_stats_emptied AFTER DELETE ON memories
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION memories_keyword_stats_emptied();

-- The memories already stored, one row per group. The owner reads every tenant's rows for
-- this one statement (Row Level Security is forced again before the transaction commits).
ALTER TABLE memories NO FORCE ROW LEVEL SECURITY;
INSERT INTO keyword_stats (tenant_id, subject, scope, session_id, category, docs, length)
SELECT tenant_id, subject, scope, session_id, category, count(*), sum(doc_len)
FROM memories WHERE status = 'active' GROUP BY 1, 2, 3, 4, 5;
ALTER TABLE memories FORCE ROW LEVEL SECURITY;

ALTER TABLE keyword_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE keyword_stats FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON keyword_stats
    USING (tenant_id = current_setting('memoryd.tenant', true))
    WITH CHECK (tenant_id = current_setting('memoryd.tenant', true));
-- UPDATE only so a fold may lock the rows it takes (SELECT ... FOR UPDATE SKIP LOCKED).
GRANT SELECT, INSERT, UPDATE, DELETE ON keyword_stats TO memoryd_app;
