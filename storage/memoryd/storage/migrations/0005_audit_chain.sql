-- memoryd schema, version 5: a tamper-evident audit log.
--
-- Each tenant's audit events form a hash chain: an event's hash covers its content and the
-- previous event's hash, so editing or deleting an event breaks every later link.
-- `memoryd audit verify --tenant T` walks the chain. Events written before this version
-- have no hash and are reported as unchained.

ALTER TABLE audit_log ADD COLUMN prev_hash bytea;
ALTER TABLE audit_log ADD COLUMN hash bytea;
CREATE INDEX audit_log_chain ON audit_log (tenant_id, seq);
