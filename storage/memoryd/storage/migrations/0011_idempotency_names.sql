-- memoryd schema, version 11: which memories and extraction jobs an idempotency record names.
--
-- A record keeps the SHA-256 of the whole request and the ids it answered with; a PURGE
-- deletes the records naming what it erases (storage/_erasure.py). `names` is derived from
-- the stored response by the database itself, for every writer of the table and for the
-- rows already there, and indexed for that lookup.

CREATE FUNCTION idempotency_names(response jsonb) RETURNS uuid[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT name::uuid), '{}')
    FROM (
        SELECT item->>'memory_id' AS name
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(response) = 'array' THEN response ELSE '[]' END) AS item
        UNION ALL
        SELECT response->>'extraction_job_id' WHERE jsonb_typeof(response) = 'object'
    ) AS named
    WHERE name ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
$$;

ALTER TABLE idempotency_keys ADD COLUMN names uuid[] GENERATED ALWAYS AS (idempotency_names(response)) STORED;
CREATE INDEX idempotency_keys_names ON idempotency_keys USING gin (names);
