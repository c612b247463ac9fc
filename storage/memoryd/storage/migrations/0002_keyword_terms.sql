-- memoryd schema, version 2: the keyword channel of recall.
--
-- memoryd tokenises memory text in Python (jieba for Chinese, Snowball for English) and
-- stores only keyed 64-bit hashes of the terms, never the words: a copy of this table, a
-- backup or a log of its queries does not hold memory text, and without the server's
-- secret the hashes cannot be reversed with a dictionary. BM25 is ranked in SQL over these
-- rows (memoryd.storage._keywords).

-- Number of terms the memory's key and text tokenise to: BM25's document length. 0 until the
-- memory's terms are written (memories written before this migration need a backfill).
ALTER TABLE memories ADD COLUMN doc_len integer NOT NULL DEFAULT 0;

-- One row per (memory, distinct term) with the term's frequency in the memory.
CREATE TABLE memory_terms (
    tenant_id       text        NOT NULL,
    subject         text        NOT NULL,            -- the memory's subject ('' for org-scoped)
    memory_id       uuid        NOT NULL,
    term            bigint      NOT NULL,            -- keyed BLAKE2b of the term, never the word
    tf              integer     NOT NULL CHECK (tf > 0),
    PRIMARY KEY (tenant_id, memory_id, term),
    -- Terms can never outlive their memory: a PURGE that deletes the memory deletes them too.
    FOREIGN KEY (tenant_id, memory_id) REFERENCES memories (tenant_id, id) ON DELETE CASCADE
);
-- The postings of a term within one subject, carrying all a search reads (memory_id, tf), so
-- a search is one index-only scan per query term. Subject sits between tenant and term
-- because every search is of one subject (plus, on request, the organisation's '' rows): a
-- plain (tenant_id, term) index would read the postings of every subject of the tenant, or
-- visit the heap to drop the other subjects' rows (EXPLAINed with 10 subjects of 5,000
-- memories: 1.3x and 3.5x slower, and both grow with the tenant). The PRIMARY KEY serves
-- replacing and deleting one memory's terms.
CREATE INDEX memory_terms_postings ON memory_terms (tenant_id, subject, term) INCLUDE (memory_id, tf);

ALTER TABLE memory_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_terms FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memory_terms
    USING (tenant_id = current_setting('memoryd.tenant', true))
    WITH CHECK (tenant_id = current_setting('memoryd.tenant', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON memory_terms TO memoryd_app;
