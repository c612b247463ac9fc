-- memoryd schema, version 7: memory content encrypted at rest, per-subject data keys.
--
-- Each (tenant, subject) has one data key, stored only wrapped by the tenant's key from the
-- key provider (memoryd.storage._envelope). A memory's text and data are stored sealed with
-- it in text_ct / data_ct; the plaintext columns stay for rows written before this version
-- and are emptied by the start-up backfill. Deleting a subject's key row (PURGE of the whole
-- subject) makes every copy of that subject's sealed content unreadable: crypto-shredding.

CREATE TABLE subject_keys (
    tenant_id       text        NOT NULL,
    subject         text        NOT NULL,            -- '' for the organisation's memories
    wrapped         bytea       NOT NULL,            -- the data key, wrapped by the tenant key
    key_id          text        NOT NULL,            -- which provider key wrapped it
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, subject)
);
ALTER TABLE subject_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE subject_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON subject_keys
    USING (tenant_id = current_setting('memoryd.tenant', true))
    WITH CHECK (tenant_id = current_setting('memoryd.tenant', true));
-- Keys are created and destroyed, not rewritten; UPDATE is granted because Postgres needs it
-- for the row locks (FOR SHARE by writers, FOR UPDATE by a purge) that order the two. The
-- worker role reads memory rows through the app role (tenant set), so it gets no grant here.
GRANT SELECT, INSERT, UPDATE, DELETE ON subject_keys TO memoryd_app;

ALTER TABLE memories ALTER COLUMN text DROP NOT NULL;
ALTER TABLE memories ADD COLUMN text_ct bytea;
ALTER TABLE memories ADD COLUMN data_ct bytea;
ALTER TABLE memories ADD CONSTRAINT memories_has_text CHECK (text IS NOT NULL OR text_ct IS NOT NULL);

ALTER TABLE memory_versions ALTER COLUMN text DROP NOT NULL;
ALTER TABLE memory_versions ADD COLUMN text_ct bytea;
ALTER TABLE memory_versions ADD COLUMN data_ct bytea;
ALTER TABLE memory_versions ADD CONSTRAINT memory_versions_has_text CHECK (text IS NOT NULL OR text_ct IS NOT NULL);

-- Rows still holding plaintext, for the start-up backfill to find without a full scan.
CREATE INDEX memories_plaintext ON memories (tenant_id) WHERE text_ct IS NULL;
CREATE INDEX memory_versions_plaintext ON memory_versions (tenant_id) WHERE text_ct IS NULL;
