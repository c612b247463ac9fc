-- memoryd schema, version 12: memory keys and tags stored only sealed and as keyed labels.
--
-- A key or a tag is stored twice, neither readable without a secret:
--   key_ct / tags_ct       sealed with the owner's data key (AES-GCM, bound to the memory id and
--                          field), for showing them: destroyed with the data key (PURGE).
--   key_label / tag_labels 16-byte keyed BLAKE2b under the tenant's term-hash secret, for
--                          finding them: equality, the one current value per key, tag filters.
-- A keyless memory has key_label '\x' (empty) and no key_ct. The plaintext columns `key` and
-- `tags` stay for rows written before this version; the start-up backfill (_backfill.py)
-- labels and seals those and empties them. A view's glob over key names is resolved to the
-- exact set of labels by opening the key names of the subjects read (_labels.py).

ALTER TABLE memories ADD COLUMN key_label bytea NOT NULL DEFAULT '\x';
ALTER TABLE memories ADD COLUMN key_ct bytea;
ALTER TABLE memories ADD COLUMN tag_labels bytea[] NOT NULL DEFAULT '{}';
ALTER TABLE memories ADD COLUMN tags_ct bytea;

ALTER TABLE memory_versions ADD COLUMN key_label bytea NOT NULL DEFAULT '\x';
ALTER TABLE memory_versions ADD COLUMN key_ct bytea;
ALTER TABLE memory_versions ADD COLUMN tag_labels bytea[] NOT NULL DEFAULT '{}';
ALTER TABLE memory_versions ADD COLUMN tags_ct bytea;

ALTER TABLE pending_values ADD COLUMN tags_ct bytea;

-- The current-value rule and the key lookups move to the label.
DROP INDEX memories_current_key;
DROP INDEX memories_by_key;
CREATE UNIQUE INDEX memories_current_key ON memories (tenant_id, subject, session_id, category, key_label)
    WHERE status = 'active' AND key_label <> '\x' AND category IN ('fact', 'preference', 'goal', 'context');
CREATE INDEX memories_by_key ON memories (tenant_id, subject, key_label) WHERE key_label <> '\x';

-- Rows still holding a plaintext key or tags, for the start-up backfill to find.
CREATE INDEX memories_unlabelled ON memories (tenant_id) WHERE key <> '' OR tags <> '{}';
CREATE INDEX memory_versions_unlabelled ON memory_versions (tenant_id) WHERE key <> '' OR tags <> '{}';
CREATE INDEX pending_values_unlabelled ON pending_values (tenant_id) WHERE tags <> '{}';

-- The backfill seals the tags of pending values in place (they were insert-and-delete only).
GRANT UPDATE ON pending_values TO memoryd_app;
