-- memoryd schema, version 26: a memory keeps every dialogue turn it comes from.
--
-- Until now a memory kept one source turn (`source_turn_id`), so an Erase by the turn that
-- said a thing could miss it: an extracted item supported by turns t2 and t5 was stored with
-- t2 only, and an item merged into an existing memory left no trace of its own turn
-- (issue 38). `source_turn_ids` holds them all, best first; a merge adds the merged item's
-- turns, a new value replaces them (its old version keeps its own, and Erase reads those too).
--
-- `source_turn_id` stays, always the first of `source_turn_ids` ('' when there is none): it is
-- what servers of the version before read and write during a rolling upgrade, and what Erase
-- also matches, so nothing such a server writes meanwhile escapes an erase by its turn. A row
-- whose `source_turn_id` is not in its `source_turn_ids` was written by such a server, and is
-- read as having that one turn (`_rows.source_turns`).
--
-- Turn ids are identifiers the caller chose, stored in the clear as `source_turn_id` was.
-- The look-up stays an index look-up: the GIN index finds the rows listing the turn, and the
-- tenant and subject (in every query) narrow them through `memories_listing`. Erase reads the
-- turns of versions within one subject's rows (`memory_versions_subject`) and those of pending
-- values within the tenant's (values held back by trust: few), so they need no index of their own.
ALTER TABLE memories ADD COLUMN source_turn_ids text[] NOT NULL DEFAULT '{}';
ALTER TABLE memory_versions ADD COLUMN source_turn_ids text[] NOT NULL DEFAULT '{}';
ALTER TABLE pending_values ADD COLUMN source_turn_ids text[] NOT NULL DEFAULT '{}';

-- The owner fills every tenant's rows for these statements (row level security is forced
-- again before the transaction commits).
ALTER TABLE memories NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_versions NO FORCE ROW LEVEL SECURITY;
ALTER TABLE pending_values NO FORCE ROW LEVEL SECURITY;
UPDATE memories SET source_turn_ids = ARRAY[source_turn_id] WHERE source_turn_id <> '';
UPDATE memory_versions SET source_turn_ids = ARRAY[source_turn_id] WHERE source_turn_id <> '';
UPDATE pending_values SET source_turn_ids = ARRAY[source_turn_id] WHERE source_turn_id <> '';
ALTER TABLE memories FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_versions FORCE ROW LEVEL SECURITY;
ALTER TABLE pending_values FORCE ROW LEVEL SECURITY;

CREATE INDEX memories_by_turns ON memories USING gin (source_turn_ids);
