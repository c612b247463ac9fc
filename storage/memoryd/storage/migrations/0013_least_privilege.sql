-- memoryd schema, version 13: servers and workers without the owner's credentials.
--
-- A deployment's servers and workers log in as memoryd_app and memoryd_worker and never hold
-- the owner's password (with it, row level security is one RESET ROLE away); only the
-- migration job does. What they used the owner's connection for at start-up is granted here:
--   * reading which migrations are applied, to refuse to run on an older schema;
--   * reading and recording the fingerprints of the deployment's shared secrets (HMACs of a
--     fixed text, never the secrets; the first process records, the rest compare);
--   * registering the embedding model's collection and activating the first one.
-- None of these tables holds tenant data.
GRANT SELECT ON schema_migrations TO memoryd_app, memoryd_worker;
GRANT SELECT, INSERT ON secret_fingerprints TO memoryd_app;
GRANT INSERT, UPDATE ON index_models TO memoryd_app;
