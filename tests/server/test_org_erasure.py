"""Erasing the organisation's memories (issue 37, item 6), and what a subject's erase says of
the organisation memories that name the subject.

Organisation-scope memories belong to the whole tenant (subject ''), sealed with a data key
of their own. ``Erase`` with ``scope = SCOPE_ORG`` reaches them through the caller's view like
any erase — a tenant-wide credential, ``may_erase``, a selector the view allows — with a receipt
and an audit event; a PURGE of them all shreds the organisation's key.
"""

from __future__ import annotations

import grpc
import psycopg
import pytest

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import draft, fails, full_view

FORGET, PURGE = svc.ERASE_MODE_FORGET, svc.ERASE_MODE_PURGE
ALL_STATUSES = [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]


def org(category: str, text: str, key: str = "", **kwargs) -> pb.MemoryDraft:
    return draft(category, text, key=key, scope=pb.SCOPE_ORG, **kwargs)


def org_texts(agent) -> list[str]:
    """The organisation's memories as a Recall with include_org finds them (keys: dress code, diet)."""
    response = agent.call("Recall", svc.RecallRequest(subject="alice", keys=["dress_code", "diet"],
                                                      filter=pb.MemoryFilter(include_org=True)))
    return sorted(s.memory.text for s in response.memories if s.memory.scope == pb.SCOPE_ORG)


def rows(postgres, query: str, *params) -> list[tuple]:
    with psycopg.connect(postgres.owner_dsn) as conn:
        return conn.execute(query, params).fetchall()


def erase_org(agent, mode=PURGE, **selector) -> svc.ErasureReceipt:
    return agent.call("Erase", svc.EraseRequest(scope=pb.SCOPE_ORG, mode=mode, reason="policy retired",
                                                **selector)).receipt


@pytest.mark.parametrize("mode", [FORGET, PURGE], ids=["forget", "purge"])
def test_an_organisation_memory_can_be_erased_by_key_with_a_receipt_and_an_audit_event(agent, postgres, tenant,
                                                                                        mode):
    agent.write("alice", org("fact", "Suits on Mondays", key="dress_code"), org("constraint", "No alcohol", key="diet"),
                draft("constraint", "No peanuts", key="diet"), consistency=svc.CONSISTENCY_WAIT_INDEXED)
    assert org_texts(agent) == ["No alcohol", "Suits on Mondays"]

    receipt = erase_org(agent, mode, key="dress_code")
    assert (receipt.counts.memories, receipt.verified) == (1, True)
    assert org_texts(agent) == ["No alcohol"]
    # The subject's own memory with a key of the same name is untouched.
    assert [m.text for m in agent.list_all("alice")] == ["No peanuts"]
    [(action, subject, erased)] = rows(postgres, "SELECT action, subject, memory_ids::text[] FROM audit_log "
                                                 "WHERE tenant_id = %s AND action LIKE 'erase.%%'", tenant)
    assert (action, subject, len(erased)) == (f"erase.{'purge' if mode == PURGE else 'forget'}", "", 1)
    [(logged_subject, reason)] = rows(postgres, "SELECT subject, reason FROM erasure_log WHERE tenant_id = %s", tenant)
    assert (logged_subject, reason) == ("", "policy retired")
    if mode == PURGE:
        assert rows(postgres, "SELECT count(*) FROM memories WHERE tenant_id = %s AND id = %s::uuid",
                    tenant, erased[0]) == [(0,)]
    # Idempotent: the same erase again finds nothing more and says what the first did.
    assert erase_org(agent, mode, key="dress_code").counts == receipt.counts


def test_purging_every_organisation_memory_shreds_the_organisations_key(agent, postgres, tenant):
    agent.write("alice", org("fact", "Suits on Mondays", key="dress_code"), org("event", "Office moved to Lyon"),
                draft("fact", "Lives in Porto", key="home_city"), consistency=svc.CONSISTENCY_WAIT_INDEXED)
    receipt = erase_org(agent, all_of_subject=True)
    assert (receipt.counts.memories, receipt.counts.keys, receipt.verified) == (2, 1, True)
    assert org_texts(agent) == []
    assert rows(postgres, "SELECT subject FROM subject_keys WHERE tenant_id = %s", tenant) == [("alice",)]
    assert [m.text for m in agent.list_all("alice")] == ["Lives in Porto"]
    # The organisation can be written to again, under a fresh key.
    agent.write("alice", org("fact", "Jeans on Fridays", key="dress_code"))
    assert org_texts(agent) == ["Jeans on Fridays"]


@pytest.mark.parametrize("case", ["bound-credential", "scope-hidden", "no-erase", "not-reading-everything"])
def test_erasing_organisation_memories_is_refused_outside_the_view_and_erases_nothing(connect, case):
    seeder = connect("seeder")
    seeder.write("alice", org("fact", "Suits on Mondays", key="dress_code"))
    views = {
        "bound-credential": full_view("probe"),
        "scope-hidden": full_view("probe", visible_fields=["id", "key", "text", "category"]),
        "no-erase": full_view("probe", may_erase=False),
        "not-reading-everything": full_view("probe", read_rules=[pb.ViewRule(category=pb.CATEGORY_FACT,
                                                                             key_patterns=["*"])]),
    }
    probe = connect("probe", view=views[case], **({"subject": "alice"} if case == "bound-credential" else {}))
    refused = fails(erase_org, probe, all_of_subject=True)
    assert refused.code == grpc.StatusCode.PERMISSION_DENIED
    assert org_texts(seeder) == ["Suits on Mondays"]


@pytest.mark.parametrize(("request_fields", "field"), [
    ({"subject": "alice", "scope": pb.SCOPE_ORG}, "subject"),
    ({"subject": "", "scope": pb.SCOPE_SUBJECT}, "subject"),
    ({"subject": "alice", "scope": pb.SCOPE_SESSION}, "scope"),
], ids=["org-with-subject", "subject-without-one", "session-scope"])
def test_an_erase_whose_scope_and_subject_disagree_is_invalid(agent, request_fields, field):
    bad = fails(agent.call, "Erase", svc.EraseRequest(key="dress_code", mode=FORGET, **request_fields))
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and field in bad.violations


def test_a_subject_erase_says_how_many_organisation_memories_still_name_the_subject(connect):
    seeder = connect("seeder")
    seeder.write("alice-7", draft("event", "Asked for a refund"),
                 org("fact", "alice-7 is a VIP customer: escalate at once", key="vip_note"),
                 org("event", "Quarterly review of key accounts", tags=["account:alice-7"]),
                 org("fact", "alice-70 is a reseller", key="reseller"),  # another id, not a mention
                 org("fact", "Office closes at six", key="hours"))
    receipt = seeder.erase("alice-7", all_of_subject=True).receipt
    assert receipt.HasField("organisation_mentions") and receipt.organisation_mentions == 2
    assert seeder.list_all("alice-7") == []
    # The organisation's memories are still there: the receipt said so.
    response = seeder.call("Recall", svc.RecallRequest(subject="alice-7", keys=["vip_note"],
                                                       filter=pb.MemoryFilter(include_org=True)))
    assert [s.memory.text for s in response.memories] == ["alice-7 is a VIP customer: escalate at once"]
    # Other selectors say nothing of the organisation.
    assert not seeder.erase("alice-7", key="vip_note").receipt.HasField("organisation_mentions")


def test_a_credential_bound_to_the_subject_is_told_nothing_of_the_organisation(connect):
    seeder = connect("seeder")
    seeder.write("alice-7", draft("event", "Asked for a refund"), org("fact", "alice-7 is a VIP", key="vip_note"))
    bound = connect("bound", view=full_view("bound"), subject="alice-7")
    receipt = bound.erase("alice-7", all_of_subject=True).receipt
    assert receipt.counts.memories == 1 and not receipt.HasField("organisation_mentions")
