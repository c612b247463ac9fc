-- memoryd schema, version 10: revoked bearer tokens.
--
-- A token is revoked by its id (the jti claim) without replacing the signing key, which
-- would end every other token too. The server refuses a token whose id is listed for its
-- tenant. A row is needed only until the token expires (expires_at; NULL: kept until an
-- operator removes it, for a token id revoked without knowing its expiry); later revocations
-- in the tenant delete the rows that are past it.

CREATE TABLE revoked_tokens (
    tenant_id       text        NOT NULL,
    jti             text        NOT NULL,
    expires_at      timestamptz,
    revoked_by      text        NOT NULL,
    revoked_at      timestamptz NOT NULL DEFAULT now(),
    reason          text        NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_id, jti)
);

ALTER TABLE revoked_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE revoked_tokens FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON revoked_tokens
    USING (tenant_id = current_setting('memoryd.tenant', true))
    WITH CHECK (tenant_id = current_setting('memoryd.tenant', true));
GRANT SELECT, INSERT, DELETE ON revoked_tokens TO memoryd_app;

-- Fingerprints (HMACs of a fixed text, never the secrets) of the secrets every process of a
-- deployment must share. Keyword term hashes are made with the term-hash secret, which is
-- kept in a file next to the signing key; a process started with another one (a fresh keys
-- folder after a signing-key rotation, say) would find no memory by words and store hashes
-- nobody else finds. It refuses to start instead. Read and written with the owner's
-- connection at start-up only: the application roles get no grant.
CREATE TABLE secret_fingerprints (
    name            text        PRIMARY KEY,
    fingerprint     bytea       NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now()
);
