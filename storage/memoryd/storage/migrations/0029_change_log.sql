-- memoryd schema, version 29: the change log that Watch streams from.
--
-- One row per change to a memory, written by triggers so that every path that changes a
-- memory (Write, extraction, consolidation, import, the lifecycle sweeper, Erase,
-- ResolveConflict) is covered without touching it: a new version row ('created', 'forgotten',
-- every other change 'changed') and a deleted memory ('erased'). A subject's PURGE deletes the
-- subject's rows here and leaves one 'subject_erased' row (memory_id NULL), in its own
-- transaction (memories/_erase.py).
--
-- seq orders the log. It is NULL until the writing transaction commits: a deferred constraint
-- trigger takes the tenant's audit lock (the key postgres/_audit.py takes, so lock order stays
-- the same), numbers the row and notifies 'memoryd_changes' with the tenant. The lock is held
-- until the commit is visible, so within a tenant seq order is commit order and a reader that
-- sees seq N has seen every seq below it: a cursor (a seq) resumes exactly once, on any replica.
--
-- The key is kept as the memory's sealed copy (key_ct), so a view's key globs can still be
-- decided for a memory purged since (its label is gone from memories).
CREATE SEQUENCE memory_change_seq;

CREATE TABLE memory_changes (
    tenant_id  text        NOT NULL,
    change_id  bigint      GENERATED ALWAYS AS IDENTITY,
    seq        bigint,
    memory_id  uuid,
    subject    text        NOT NULL,
    scope      text        NOT NULL DEFAULT 'subject',
    session_id text        NOT NULL DEFAULT '',
    category   text,
    key_label  bytea       NOT NULL DEFAULT '\x',
    key_ct     bytea,
    kind       text        NOT NULL CHECK (kind IN ('created', 'changed', 'forgotten', 'erased', 'subject_erased')),
    version    integer     NOT NULL DEFAULT 0,
    at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, change_id)
);
CREATE UNIQUE INDEX memory_changes_by_seq ON memory_changes (tenant_id, seq);
CREATE INDEX memory_changes_by_subject ON memory_changes (tenant_id, subject, seq);

-- The highest seq pruned by retention, per tenant: a cursor at or below it cannot resume.
CREATE TABLE memory_change_horizon (
    tenant_id text   PRIMARY KEY,
    seq       bigint NOT NULL
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memory_changes', 'memory_change_horizon']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_setting(''memoryd.tenant'', true)) '
            'WITH CHECK (tenant_id = current_setting(''memoryd.tenant'', true))', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO memoryd_app', t);
    END LOOP;
END
$$;
GRANT USAGE ON SEQUENCE memory_change_seq TO memoryd_app;

-- A new version, or a deleted memory. Each function sets the row's own tenant for its own
-- statements and puts the caller's back after them, so a statement run outside a tenant's
-- transaction (the owner's maintenance) is logged too. (A function's SET clause would do it, but
-- only a superuser may attach a setting of ours to a function.)
CREATE FUNCTION memory_change_logged() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
    memory uuid;
    kind text;
    caller text := current_setting('memoryd.tenant', true);
BEGIN
    -- Each branch names only its own table's columns (a branch is planned when first run).
    IF TG_OP = 'DELETE' THEN
        r := OLD;
        memory := OLD.id;
        kind := 'erased';
    ELSE
        r := NEW;
        memory := NEW.memory_id;
        kind := CASE NEW.change WHEN 'created' THEN 'created' WHEN 'forgotten' THEN 'forgotten' ELSE 'changed' END;
    END IF;
    PERFORM set_config('memoryd.tenant', r.tenant_id, true);
    INSERT INTO memory_changes (tenant_id, memory_id, subject, scope, session_id, category, key_label, key_ct,
                                kind, version)
    VALUES (r.tenant_id, memory, r.subject, r.scope, r.session_id, r.category, r.key_label, r.key_ct, kind,
            r.version);
    PERFORM set_config('memoryd.tenant', coalesce(caller, ''), true);
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_versions_change AFTER INSERT ON memory_versions
    FOR EACH ROW EXECUTE FUNCTION memory_change_logged();
CREATE TRIGGER memories_erased_change AFTER DELETE ON memories
    FOR EACH ROW EXECUTE FUNCTION memory_change_logged();

-- At commit: the tenant's audit lock, then the row's place in the log, then the wake-up.
-- A row deleted again in its own transaction (a subject's purge) matches nothing.
CREATE FUNCTION memory_change_number() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    caller text := current_setting('memoryd.tenant', true);
BEGIN
    PERFORM set_config('memoryd.tenant', NEW.tenant_id, true);
    PERFORM pg_advisory_xact_lock(hashtextextended('memoryd-audit' || chr(31) || NEW.tenant_id, 1));
    UPDATE memory_changes SET seq = nextval('memory_change_seq')
        WHERE tenant_id = NEW.tenant_id AND change_id = NEW.change_id;
    PERFORM pg_notify('memoryd_changes', NEW.tenant_id);
    PERFORM set_config('memoryd.tenant', coalesce(caller, ''), true);
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER memory_changes_number AFTER INSERT ON memory_changes
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION memory_change_number();
