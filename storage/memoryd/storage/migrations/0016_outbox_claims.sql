-- memoryd schema, version 16: the outbox is claimed under a lease, not a held lock.
--
-- A worker claims a batch in one short transaction — it moves next_attempt_at forward by a
-- lease and stamps the rows with its claim token — then embeds and writes to the vector index
-- with no transaction open, and settles in another short one: it deletes (or reschedules)
-- only the rows still carrying its token. A row taken away meanwhile (folded by a newer
-- Write, dropped by an Erase, claimed again after the lease ran out) is not touched.
--
-- memoryd_worker may now also INSERT into the outbox (ids only, no content, as before): when
-- a memory changed while its vector was being written, the worker queues it once more, in
-- the same transaction as it settles, so the index ends at the memory's current state.
ALTER TABLE outbox ADD COLUMN claim uuid;
GRANT INSERT ON outbox TO memoryd_worker;
