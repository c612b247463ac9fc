"""Erase through gRPC: every selector in both modes, the receipt, what FORGET keeps and PURGE
removes, idempotence, and that only the named subject's own memories are ever touched."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import grpc
import psycopg
import pytest
from psycopg.types.json import Jsonb

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from tests.support import draft, fails

FORGET, PURGE = svc.ERASE_MODE_FORGET, svc.ERASE_MODE_PURGE
MODES = [FORGET, PURGE]
MODE_IDS = ["forget", "purge"]
ALL_STATUSES = [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]


@dataclass
class World:
    """What was written: memory ids by label, and how many versions each has."""

    ids: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)

    def add(self, label: str, result: svc.WriteResult) -> None:
        self.ids[label] = result.memory_id
        self.versions[label] = result.version


def build_world(agent) -> World:
    """Alice's memories A-G, plus bob's and the org's, all written through gRPC."""
    world = World()

    def write(subject: str, labelled: dict[str, pb.MemoryDraft]) -> None:
        # One request per subject and round; WAIT_INDEXED settles its index work, so no erase
        # races the outbox worker.
        response = agent.write(subject, *labelled.values(), consistency=svc.CONSISTENCY_WAIT_INDEXED)
        for label, result in zip(labelled, response.results, strict=True):
            world.add(label, result)

    # The first version of each memory...
    write("alice", {
        "A": draft("preference", "Vegetarian", key="diet", source_turn_id="turn-7"),
        "B": draft("constraint", "No peanuts", key="diet"),
        "C": draft("constraint", "No shellfish", key="diet"),
        "D": draft("event", "Visited Lisbon"),
        "E": draft("event", "Moved to Porto", source_turn_id="turn-7"),
        "F": draft("fact", "Lives in Lisbon", key="home_city"),
        "G": draft("context", "In a hurry", key="mood", scope=pb.SCOPE_SESSION, session_id="session-1"),
        "org": draft("constraint", "No alcohol at work events", key="diet", scope=pb.SCOPE_ORG,
                     source_turn_id="turn-7"),
    })
    write("bob", {"bob": draft("preference", "Omnivore", key="diet", source_turn_id="turn-7"),
                  "bob-event": draft("event", "Visited Lisbon", source_turn_id="turn-7")})
    # ...then the second: A updated (from turn-7 too), D merged, F given a new value, bob's updated.
    write("alice", {"A": draft("preference", "Vegan", key="diet", source_turn_id="turn-7"),
                    "D": draft("event", "visited lisbon", importance=0.9),
                    "F": draft("fact", "Lives in Porto", key="home_city")})
    write("bob", {"bob": draft("preference", "Pescatarian", key="diet", source_turn_id="turn-7")})
    assert world.versions == {"A": 2, "B": 1, "C": 1, "D": 2, "E": 1, "F": 2, "G": 1,
                              "bob": 2, "bob-event": 1, "org": 1}
    assert len(set(world.ids.values())) == len(world.ids)
    return world


ALICE = ["A", "B", "C", "D", "E", "F", "G"]
# selector (built from the world) → the labels it must select.
SELECTORS = {
    "ids": (lambda w: {"ids": svc.MemoryIds(ids=[w.ids["A"], w.ids["F"]])}, ["A", "F"]),
    "key": (lambda w: {"key": "diet"}, ["A", "B", "C"]),
    "source_turn_id": (lambda w: {"source_turn_id": "turn-7"}, ["A", "E"]),
    "category": (lambda w: {"category": pb.CATEGORY_EVENT}, ["D", "E"]),
    "all_of_subject": (lambda w: {"all_of_subject": True}, ALICE),
}


def snapshot(agent) -> dict[str, tuple[str, int, str]]:
    """Every memory of alice, bob and the org in any state, by id: (text, version, status)."""
    found = {}
    flt = pb.MemoryFilter(include_org=True, session_id="session-1")
    for subject in ("alice", "bob"):
        for m in agent.list_all(subject, statuses=ALL_STATUSES, filter=flt):
            found[m.id] = (m.text, m.version, pb.MemoryStatus.Name(m.status))
    return found


def is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("selector", list(SELECTORS), ids=list(SELECTORS))
def test_erase_selects_exactly_the_named_memories_and_reports_them(agent, selector, mode):
    world = build_world(agent)
    build, chosen = SELECTORS[selector]
    before = snapshot(agent)

    receipt = agent.erase("alice", mode=mode, reason="user request", **build(world)).receipt

    expected_versions = sum(world.versions[label] for label in chosen) if mode == PURGE else 0
    assert receipt.mode == mode
    # The world is fully indexed, so there is no pending index work left to drop.
    assert (receipt.counts.memories, receipt.counts.versions, receipt.counts.outbox) == (
        len(chosen), expected_versions, 0
    )
    assert receipt.verified
    assert is_uuid(receipt.erase_id)

    after = snapshot(agent)
    chosen_ids = {world.ids[label] for label in chosen}
    for memory_id, (text, version, status) in before.items():
        if memory_id not in chosen_ids:
            assert after[memory_id] == (text, version, status), f"{text!r} must not be touched"
        elif mode == FORGET:
            assert after[memory_id] == (text, version + 1, "MEMORY_STATUS_FORGOTTEN")
        else:
            assert memory_id not in after


@pytest.mark.parametrize("selector", list(SELECTORS), ids=list(SELECTORS))
def test_forget_keeps_the_memory_for_audit_but_never_recalls_it(agent, selector):
    world = build_world(agent)
    build, chosen = SELECTORS[selector]

    agent.erase("alice", mode=FORGET, **build(world))

    forgotten = {m.id: m for m in agent.list_all("alice", statuses=[pb.MEMORY_STATUS_FORGOTTEN],
                                                 filter=pb.MemoryFilter(session_id="session-1"))}
    assert set(forgotten) == {world.ids[label] for label in chosen}
    recalled = agent.recall_keys("alice", "diet", "home_city", "mood",
                                 filter=pb.MemoryFilter(session_id="session-1"))
    assert not {m.memory.id for m in recalled.memories} & set(forgotten)
    active = agent.list_all("alice", filter=pb.MemoryFilter(session_id="session-1"))
    assert not {m.id for m in active} & set(forgotten)
    for label in chosen:
        versions = agent.history("alice", world.ids[label]).versions
        assert len(versions) == world.versions[label] + 1
        assert versions[0].change == svc.CHANGE_KIND_FORGOTTEN
        assert versions[0].memory.status == pb.MEMORY_STATUS_FORGOTTEN


@pytest.mark.parametrize("selector", list(SELECTORS), ids=list(SELECTORS))
def test_purge_removes_the_memory_and_its_history(agent, selector):
    world = build_world(agent)
    build, chosen = SELECTORS[selector]

    agent.erase("alice", mode=PURGE, **build(world))

    listed = {m.id for m in agent.list_all("alice", statuses=ALL_STATUSES,
                                           filter=pb.MemoryFilter(session_id="session-1"))}
    for label in chosen:
        assert world.ids[label] not in listed
        failure = fails(agent.history, "alice", world.ids[label])
        assert failure.code == grpc.StatusCode.NOT_FOUND
    recalled = agent.recall_keys("alice", "diet", "home_city", "mood", filter=pb.MemoryFilter(session_id="session-1"))
    assert not {m.memory.id for m in recalled.memories} & {world.ids[label] for label in chosen}


def test_purge_after_forget_removes_the_forgotten_memory_and_all_its_versions(agent):
    world = build_world(agent)
    agent.erase("alice", mode=FORGET, key="diet")

    receipt = agent.erase("alice", mode=PURGE, key="diet").receipt

    # Each forgotten memory gained one version. Its index work is one delete each, which the
    # outbox worker may or may not have done yet when the purge drops what is left of it.
    counts = receipt.counts
    assert (counts.memories, counts.versions) == (3, (2 + 1) + (1 + 1) + (1 + 1))
    assert 0 <= counts.outbox <= 3
    assert receipt.verified
    assert not {world.ids[x] for x in "ABC"} & {m.id for m in agent.list_all("alice", statuses=ALL_STATUSES)}


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("selector", list(SELECTORS), ids=list(SELECTORS))
def test_erase_is_idempotent(agent, selector, mode):
    world = build_world(agent)
    build, _ = SELECTORS[selector]
    first = agent.erase("alice", mode=mode, **build(world)).receipt
    state = snapshot(agent)

    repeat = agent.erase("alice", mode=mode, **build(world)).receipt

    # The same request again (a client's retry) erases nothing more and is answered with the
    # first erase's receipt — not "0 erased", which would lose it.
    assert first.counts.memories > 0
    assert repeat == first and repeat.verified
    assert snapshot(agent) == state
    # Another request that finds nothing is a receipt of its own.
    other = agent.erase("alice", mode=mode, reason="again", **build(world)).receipt
    assert other.counts == svc.StoreCounts() and other.verified
    assert is_uuid(other.erase_id) and other.erase_id != first.erase_id


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_erasing_all_of_alice_never_touches_bob_or_the_org(agent, mode):
    world = build_world(agent)
    before = snapshot(agent)
    others = ["bob", "bob-event", "org"]
    histories = {label: agent.history("bob" if label.startswith("bob") else "alice", world.ids[label])
                 for label in others}

    agent.erase("alice", mode=mode, all_of_subject=True)

    after = snapshot(agent)
    for label in others:
        memory_id = world.ids[label]
        assert after[memory_id] == before[memory_id]
        subject = "bob" if label.startswith("bob") else "alice"
        assert agent.history(subject, memory_id) == histories[label]
    assert agent.recall_keys("bob", "diet").memories[0].memory.text == "Pescatarian"
    org = agent.recall_keys("alice", "diet", filter=pb.MemoryFilter(include_org=True))
    assert [m.memory.text for m in org.memories] == ["No alcohol at work events"]


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("victim", ["bob", "bob-event", "org"], ids=["bobs-preference", "bobs-event", "org-memory"])
def test_erase_by_ids_of_memories_alice_does_not_own_erases_nothing(agent, mode, victim):
    world = build_world(agent)
    before = snapshot(agent)

    receipt = agent.erase("alice", mode=mode, ids=svc.MemoryIds(ids=[world.ids[victim]])).receipt

    assert receipt.counts == svc.StoreCounts()
    assert receipt.verified
    assert snapshot(agent) == before


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_erase_by_ids_erases_only_the_ids_alice_owns(agent, mode):
    world = build_world(agent)
    before = snapshot(agent)

    receipt = agent.erase("alice", mode=mode, ids=svc.MemoryIds(ids=[world.ids["B"], world.ids["bob"],
                                                                       world.ids["org"]])).receipt

    assert receipt.counts.memories == 1
    assert receipt.verified
    after = snapshot(agent)
    assert after[world.ids["bob"]] == before[world.ids["bob"]]
    assert after[world.ids["org"]] == before[world.ids["org"]]
    if mode == PURGE:
        assert world.ids["B"] not in after
    else:
        assert after[world.ids["B"]][2] == "MEMORY_STATUS_FORGOTTEN"


def idempotency_rows(postgres, tenant: str) -> list[tuple[str, list[str]]]:
    """(key, every id named in its stored response) of the tenant's idempotency records."""
    with psycopg.connect(postgres.owner_dsn) as conn:
        rows = conn.execute("SELECT key, response FROM idempotency_keys WHERE tenant_id = %s ORDER BY key",
                            (tenant,)).fetchall()
    return [(key, [r["memory_id"] for r in response] if isinstance(response, list) else
             [response["extraction_job_id"]]) for key, response in rows]


@pytest.mark.parametrize("selector", ["ids", "all_of_subject"])
def test_purge_drops_the_idempotency_records_of_the_writes_it_erased(agent, postgres, tenant, selector):
    items = (draft("event", "Visited Lisbon"), draft("event", "Moved to Porto"))
    trip = {"idempotency_key": "trip", "consistency": svc.CONSISTENCY_WAIT_INDEXED}
    first = agent.write("alice", *items, **trip)
    ids = [r.memory_id for r in first.results]
    kept = agent.write("alice", draft("fact", "Lives in Porto", key="home_city"), idempotency_key="home").results
    other = agent.write("bob", draft("event", "Visited Lisbon"), idempotency_key="bob-trip").results
    assert [r.memory_id for r in agent.write("alice", *items, **trip).results] == ids  # a retry
    assert [key for key, _ in idempotency_rows(postgres, tenant)] == ["bob-trip", "home", "trip"]

    selection = {"ids": svc.MemoryIds(ids=ids[:1])} if selector == "ids" else {"all_of_subject": True}
    assert agent.erase("alice", mode=PURGE, **selection).receipt.verified

    # The record naming a purged memory is gone (the request's hash and the ids with it).
    left = idempotency_rows(postgres, tenant)
    assert [key for key, _ in left] == (["bob-trip", "home"] if selector == "ids" else ["bob-trip"])
    assert not {ids[0]} & {name for _, names in left for name in names}
    assert dict(left)["bob-trip"] == [other[0].memory_id]
    # A retry with the purged write's key is a new request: it writes again, with new ids.
    again = agent.write("alice", *items, **trip).results
    assert again[0].outcome == svc.WRITE_OUTCOME_CREATED and again[0].memory_id != ids[0]
    if selector == "all_of_subject":
        assert again[1].outcome == svc.WRITE_OUTCOME_CREATED and again[1].memory_id != ids[1]
        assert agent.write("alice", draft("fact", "Lives in Porto", key="home_city"),
                           idempotency_key="home").results[0].memory_id != kept[0].memory_id


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_purging_a_subject_drops_the_idempotency_records_of_its_extraction_jobs(agent, postgres, tenant, mode):
    jobs = {subject: str(uuid.uuid4()) for subject in ("alice", "bob")}
    with psycopg.connect(postgres.owner_dsn) as conn:
        for subject, job in jobs.items():
            conn.execute("INSERT INTO extraction_jobs (tenant_id, id, subject, agent, state, turn_count, finished_at) "
                         "VALUES (%s, %s, %s, 'agent-1', 'succeeded', 1, now())", (tenant, job, subject))
            conn.execute("INSERT INTO idempotency_keys (tenant_id, agent, key, request_hash, response) "
                         "VALUES (%s, 'agent-1', %s, %s, %s)",
                         (tenant, f"turns-{subject}", b"h" * 32, Jsonb({"extraction_job_id": job})))

    agent.erase("alice", mode=mode, all_of_subject=True)

    kept = ["turns-bob"] if mode == PURGE else ["turns-alice", "turns-bob"]
    assert [key for key, _ in idempotency_rows(postgres, tenant)] == kept
