-- memoryd schema, version 24: an erasure receipt counts only what its caller can see.
--
-- An erase removes every row it selects, including memories the caller cannot tell exist (a
-- lapsed one, or a forgotten one for a view that hides `status`), but the receipt it answers
-- with counts only the memories the caller could list, their versions and index work, and
-- the caller's own extraction jobs (issue 37). The erasure log's `counts` keep every count,
-- and, under `answered`, the receipt's (with the ids it counted, so a retried erase answers
-- the same receipt); a check records the vectors deleted and, here, those of the counted ids.
ALTER TABLE erasure_checks ADD COLUMN counted_vectors bigint;
