-- memoryd schema, version 21: how many requests a deployment has in flight at its extraction model.
--
-- A model server on a CPU answers one request at a time, in minutes. Every worker (each
-- replica's in-process one, `memoryd worker`) takes a slot of the endpoint before it claims a
-- job, in the same transaction, and gives it back when the model has answered — so the limit
-- holds across replicas. A request abandoned on a timeout may still be running on the model's
-- server: its slot stays taken for one more timeout. A worker that dies leaves its slot taken
-- only until the lease (busy_until) runs out. Endpoints are keyed by a hash of their URL; the
-- table holds no tenant data and only memoryd_worker touches it.
CREATE TABLE extraction_slots (
    endpoint    text        NOT NULL,
    slot        integer     NOT NULL CHECK (slot >= 0),
    busy_until  timestamptz NOT NULL DEFAULT '-infinity',
    holder      uuid,
    PRIMARY KEY (endpoint, slot)
);
ALTER TABLE extraction_slots ENABLE ROW LEVEL SECURITY;
ALTER TABLE extraction_slots FORCE ROW LEVEL SECURITY;
CREATE POLICY extraction_slots_worker ON extraction_slots TO memoryd_worker USING (true) WITH CHECK (true);
GRANT SELECT, INSERT, UPDATE ON extraction_slots TO memoryd_worker;
