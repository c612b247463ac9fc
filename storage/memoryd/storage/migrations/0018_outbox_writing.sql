-- memoryd schema, version 18: an outbox claim says when its vectors are being written.
--
-- A worker claims a batch, embeds it with no transaction open, then — in one short
-- transaction — marks the rows it still holds as `writing` (and renews their lease) before it
-- writes their vectors. A purge drops every claimed row that is not yet writing: the worker
-- then finds the row gone and writes nothing for that memory. Only rows already writing are
-- left for the purge to wait for, and that lasts one write to the vector index, not a batch
-- of embeddings. The flag means something only while the claim holds (claim set, lease not
-- run out); every new claim clears it.
ALTER TABLE outbox ADD COLUMN writing boolean NOT NULL DEFAULT false;
