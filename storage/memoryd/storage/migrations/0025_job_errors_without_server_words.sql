-- memoryd schema, version 25: extraction job errors without the model server's words.
--
-- Versions 21 and 22 kept, in a failed (or retried) extraction job's error, an excerpt of the
-- model server's error body in quotes: `the extraction model refused the request: HTTP 400
-- "…"`. The excerpt was rid of what the server echoed of the job's turns only where it
-- repeated them word for word; an echo in JSON (quotes escaped) or with \u escapes stayed,
-- in the clear, after the turns themselves were deleted and after an Erase by source turn.
-- Errors now give the status and a reason of memoryd's only (server/_chat_errors.py); this
-- drops the quoted part of every error written before, and keeps the status and the
-- "(gave up after N attempts)" the worker added.
--
-- Not here: the audit events of those failures (`extraction.failed`, details.error) hold the
-- same text, but each is hashed into its tenant's chain, and rewriting one would be
-- indistinguishable from tampering with it.
--
-- The owner updates every tenant's rows for this one statement (row level security is
-- forced again before the transaction commits).
ALTER TABLE extraction_jobs NO FORCE ROW LEVEL SECURITY;
UPDATE extraction_jobs
SET error = substring(error FROM '^the extraction model (?:refused the request|was unavailable): HTTP [0-9]{3}')
            || coalesce(substring(error FROM ' \(gave up after [0-9]+ attempts\)$'), '')
WHERE error ~ '^the extraction model (?:refused the request|was unavailable): HTTP [0-9]{3} "';
ALTER TABLE extraction_jobs FORCE ROW LEVEL SECURITY;
