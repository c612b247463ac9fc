-- memoryd schema, version 17: BM25's collection statistics kept with the writes.
--
-- A keyword search scores with N (how many memories the caller may read) and the average
-- document length of those memories. Counting them on every query scanned the whole subject:
-- ~90 ms of a Recall on a subject of 100,000 memories. They are now kept per (tenant,
-- subject, scope, session, category) — the columns a read's visibility and a view's `*` rules
-- select on — as rows of changes (docs, length) that a statement trigger on memories appends
-- in the same transaction as the change itself: an insert, a status change, a new doc_len, a
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

CREATE FUNCTION memories_keyword_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO keyword_stats (tenant_id, subject, scope, session_id, category, docs, length)
        SELECT tenant_id, subject, scope, session_id, category, count(*), sum(doc_len)
        FROM new_rows WHERE status = 'active' GROUP BY 1, 2, 3, 4, 5;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO keyword_stats (tenant_id, subject, scope, session_id, category, docs, length)
        SELECT tenant_id, subject, scope, session_id, category, sum(docs), sum(length)
        FROM (SELECT tenant_id, subject, scope, session_id, category, 1 AS docs, doc_len AS length
              FROM new_rows WHERE status = 'active'
              UNION ALL
              SELECT tenant_id, subject, scope, session_id, category, -1, -doc_len
              FROM old_rows WHERE status = 'active') AS change
        GROUP BY 1, 2, 3, 4, 5 HAVING sum(docs) <> 0 OR sum(length) <> 0;
    ELSE
        INSERT INTO keyword_stats (tenant_id, subject, scope, session_id, category, docs, length)
        SELECT tenant_id, subject, scope, session_id, category, -count(*), -sum(doc_len)
        FROM old_rows WHERE status = 'active' GROUP BY 1, 2, 3, 4, 5;
        -- A purge: groups left with nothing are dropped, so no row names an erased subject.
        DELETE FROM keyword_stats k USING (
            SELECT s.tenant_id, s.subject, s.scope, s.session_id, s.category
            FROM keyword_stats s
            JOIN (SELECT DISTINCT tenant_id, subject, scope, session_id, category FROM old_rows) AS touched
              USING (tenant_id, subject, scope, session_id, category)
            GROUP BY 1, 2, 3, 4, 5 HAVING sum(s.docs) = 0 AND sum(s.length) = 0) AS empty
        WHERE (k.tenant_id, k.subject, k.scope, k.session_id, k.category)
            = (empty.tenant_id, empty.subject, empty.scope, empty.session_id, empty.category);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_keyword_stats_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_keyword_stats();
CREATE TRIGGER memories_keyword_stats_update AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_keyword_stats();
CREATE TRIGGER memories_keyword_stats_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_keyword_stats();

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
