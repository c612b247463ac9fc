-- memoryd schema, version 20: which tags exist, found without reading a subject's memories.
--
-- A Recall by meaning asks which of the `entity:` tags its query's words could name are carried
-- by a memory the caller may read (issue 15; bench/RESULTS.md, "Multi-hop and open-domain"):
-- one EXISTS per proposed tag label. Without an index each absent label (most of them) would
-- scan the subject's memories; with it, each is one index probe. Labels are keyed hashes
-- under the tenant's secret, so a label never matches another tenant's rows. Only live rows
-- are looked up.
CREATE INDEX memories_tag_labels ON memories USING gin (tag_labels) WHERE status = 'active';
