"""Every decision of the guard (``memoryd.server.guard``), one row per case, with no server.

Each table row is a principal, a view and a request made of domain objects, and the decision
the guard must make: the filter, items, mask or grant it returns, or the exact refusal
(reason and message) a caller would receive. Nothing is stored or served: the guard decides
from the credential, the view and the request alone, so this is all it needs. The same
denials reach callers through gRPC in tests/server (test_guard_attacks, test_view_attacks,
test_hidden_fields, test_token_issuance, test_export_import).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from memoryd.domain import (
    MEMORY_FIELDS,
    Category,
    ChangeKind,
    LoggedChange,
    Draft,
    EraseSelector,
    Memory,
    MemorydError,
    ReadFilter,
    Scope,
    ScoreMask,
    SourceKind,
    Stability,
    Status,
    View,
    ViewRule,
)
from memoryd.server._auth import Principal
from memoryd.server.guard._rules import ASKED_FIELDS
from memoryd.server.guard import (
    Guard,
    TokenGrant,
    WriteItem,
    check_admin,
    check_exportable,
    guard_for,
    token_grant,
)
from memoryd.server.validation import IssueTokenCommand

C = Category
ALL = frozenset(MEMORY_FIELDS)
AGENT = Principal("acme", "planner", frozenset({"agent"}))
BOUND = Principal("acme", "planner", frozenset({"agent"}), subject="alice")  # may touch alice alone
ADMIN = Principal("acme", "ops", frozenset({"admin"}))
BOUND_ADMIN = Principal("acme", "ops", frozenset({"admin"}), subject="alice")
EVERY_RULE = tuple(ViewRule(c) for c in Category)


@dataclass(frozen=True)
class Refused:
    """A decision that refuses the call: the error a caller receives, by kind, reason and message."""

    kind: str
    reason: str
    message: str


def denied(message: str, reason: str = "VIEW_DENIED") -> Refused:
    return Refused("PermissionDenied", reason, message)


def hidden(field: str) -> Refused:
    return denied(f"this agent's view hides the field '{field}', so it cannot filter, look up or select memories "
                  "by it")


def decide(decision: Callable[[], Any]) -> Any:
    """What the guard decided: its answer, or the refusal it raised."""
    try:
        return decision()
    except MemorydError as error:
        return Refused(type(error).__name__, error.reason, error.message)


def view(read: tuple[ViewRule, ...] = EVERY_RULE, write: tuple[ViewRule, ...] = EVERY_RULE, *,
         fields: frozenset[str] = ALL, hide: tuple[str, ...] = (), may_erase: bool = True,
         selectors: tuple[str, ...] = (), max_kind: SourceKind = SourceKind.INPUT) -> View:
    return View("planner", read, write, may_erase, fields - set(hide), erase_selectors=frozenset(selectors),
                max_source_kind=max_kind)


def rules_of(v: View) -> tuple[tuple[Category, tuple[str, ...]], ...]:
    return tuple((r.category, r.key_patterns) for r in v.read_rules)


# A view that reads some preferences, the home_* facts and every event.
SOME = (ViewRule(C.PREFERENCE, ("language", "diet")), ViewRule(C.FACT, ("home_*",)), ViewRule(C.EVENT))
PARTIAL = view(SOME)
FULL = view()
NO_READS = view(())
T0 = datetime(2026, 1, 1, tzinfo=UTC)


# -- the read filter --------------------------------------------------------------------------

READ_FILTER = [
    # Narrowing: the request's filter keeps what it asked for, plus the view's read rules.
    pytest.param(AGENT, PARTIAL, ReadFilter("alice"), (),
                 ReadFilter("alice", rules=rules_of(PARTIAL)), id="narrowed-to-the-view-rules"),
    pytest.param(AGENT, NO_READS, ReadFilter("alice"), (),
                 ReadFilter("alice", rules=()), id="no-read-rule-reads-nothing"),
    pytest.param(AGENT, PARTIAL, ReadFilter("alice", categories=(C.PREFERENCE,)), (),
                 ReadFilter("alice", categories=(C.PREFERENCE,), rules=rules_of(PARTIAL)), id="category-in-rules"),
    pytest.param(AGENT, PARTIAL, ReadFilter("alice", keys=("home_city",)), (),
                 ReadFilter("alice", keys=("home_city",), rules=rules_of(PARTIAL)), id="key-matching-a-glob"),
    pytest.param(AGENT, PARTIAL, ReadFilter("alice"), ("diet",),
                 ReadFilter("alice", rules=rules_of(PARTIAL)), id="recalled-key-in-rules"),
    pytest.param(AGENT, FULL, ReadFilter("alice", tags=("t",), session_id="s", include_org=True,
                                         statuses=(Status.ACTIVE, Status.FORGOTTEN), updated_after=T0), (),
                 ReadFilter("alice", tags=("t",), session_id="s", include_org=True,
                            statuses=(Status.ACTIVE, Status.FORGOTTEN), updated_after=T0, rules=rules_of(FULL)),
                 id="every-filter-on-shown-fields"),
    pytest.param(BOUND, FULL, ReadFilter("alice"), (),
                 ReadFilter("alice", rules=rules_of(FULL)), id="bound-credential-its-own-subject"),
    # Refused from the rules: a category or key the view does not read.
    pytest.param(AGENT, PARTIAL, ReadFilter("alice", categories=(C.GOAL,)), (),
                 denied("no read rule of this agent's view covers the category 'goal'"), id="category-outside-rules"),
    pytest.param(AGENT, NO_READS, ReadFilter("alice", categories=(C.FACT,)), (),
                 denied("no read rule of this agent's view covers the category 'fact'"), id="deny-by-default"),
    pytest.param(AGENT, PARTIAL, ReadFilter("alice", keys=("iban",)), (),
                 denied("no read rule of this agent's view allows the key 'iban'"), id="key-outside-rules"),
    pytest.param(AGENT, PARTIAL, ReadFilter("alice"), ("iban",),
                 denied("no read rule of this agent's view allows the key 'iban'"), id="recalled-key-outside-rules"),
    pytest.param(AGENT, PARTIAL, ReadFilter("alice", categories=(C.PREFERENCE,), keys=("home_city",)), (),
                 denied("no read rule of this agent's view allows the key 'home_city' within the requested "
                        "categories"), id="key-outside-the-requested-categories"),
    pytest.param(AGENT, view((ViewRule(C.EVENT),)), ReadFilter("alice", keys=("trip",)), (),
                 denied("no read rule of this agent's view allows the key 'trip'"), id="episodic-rule-allows-no-key"),
    # Refused from the field mask: selecting by a field the view hides would tell its value.
    pytest.param(AGENT, view(hide=("category",)), ReadFilter("alice", categories=(C.FACT,)), (),
                 hidden("category"), id="hidden-category"),
    pytest.param(AGENT, view(hide=("key",)), ReadFilter("alice", keys=("home_city",)), (),
                 hidden("key"), id="hidden-key"),
    pytest.param(AGENT, view(hide=("key",)), ReadFilter("alice"), ("home_city",),
                 hidden("key"), id="hidden-key-of-a-recall"),
    pytest.param(AGENT, view(hide=("tags",)), ReadFilter("alice", tags=("t",)), (),
                 hidden("tags"), id="hidden-tags"),
    pytest.param(AGENT, view(hide=("updated_at",)), ReadFilter("alice", updated_before=T0), (),
                 hidden("updated_at"), id="hidden-time"),
    pytest.param(AGENT, view(hide=("status",)), ReadFilter("alice", statuses=(Status.FORGOTTEN,)), (),
                 hidden("status"), id="hidden-status"),
    pytest.param(AGENT, view(hide=("scope",)), ReadFilter("alice", include_org=True), (),
                 hidden("scope"), id="hidden-scope"),
    pytest.param(AGENT, view(hide=("session_id",)), ReadFilter("alice", session_id="s"), (),
                 hidden("session_id"), id="hidden-session"),
    # Refused from the credential: a subject binding, checked before anything else.
    pytest.param(BOUND, FULL, ReadFilter("bob"), (),
                 denied("this credential is bound to another subject", "SUBJECT_NOT_ALLOWED"), id="bound-other-subject"),
    pytest.param(BOUND, view(hide=("scope",)), ReadFilter("alice", include_org=True), (),
                 denied("a subject-bound credential cannot read organisation memories", "SUBJECT_NOT_ALLOWED"),
                 id="bound-reading-the-organisation"),
]


@pytest.mark.parametrize(("principal", "v", "flt", "keys", "expected"), READ_FILTER)
def test_the_read_filter(principal: Principal, v: View, flt: ReadFilter, keys: tuple[str, ...], expected: Any):
    assert decide(lambda: Guard(principal, v).read_filter(flt, keys)) == expected


SUBJECTS = [
    pytest.param(AGENT, "bob", None, id="unbound-any-subject"),
    pytest.param(AGENT, "", None, id="unbound-the-organisation"),
    pytest.param(BOUND, "alice", None, id="bound-its-subject"),
    pytest.param(BOUND, "bob", denied("this credential is bound to another subject", "SUBJECT_NOT_ALLOWED"),
                 id="bound-another-subject"),
    pytest.param(BOUND, "", denied("this credential is bound to another subject", "SUBJECT_NOT_ALLOWED"),
                 id="bound-the-organisation"),
]


@pytest.mark.parametrize(("principal", "subject", "expected"), SUBJECTS)
def test_the_subject_binding(principal: Principal, subject: str, expected: Any):
    assert decide(lambda: Guard(principal, FULL).check_subject(subject)) == expected


# What each selection a request may make is by (``ASKED_FIELDS``): the field the view must show.
SELECTED_BY = [("categories", "category"), ("keys", "key"), ("tags", "tags"), ("time range", "updated_at"),
               ("statuses", "status"), ("include_org", "scope"), ("session_id", "session_id"), ("ids", "id"),
               ("key", "key"), ("source_turn", "provenance"), ("category", "category"), ("memory_id", "id")]
ASKED = [
    *(pytest.param(what, True, (), None, id=f"{what}-shown") for what, _ in SELECTED_BY),
    *(pytest.param(what, True, (field,), hidden(field), id=f"{what}-hidden") for what, field in SELECTED_BY),
    *(pytest.param(what, False, (field,), None, id=f"{what}-unused") for what, field in SELECTED_BY),
]


def test_every_selection_the_guard_knows_has_its_rows():
    assert {what for what, _ in SELECTED_BY} == set(ASKED_FIELDS)


@pytest.mark.parametrize(("what", "used", "hide", "expected"), ASKED)
def test_selecting_by_a_field(what: str, used: bool, hide: tuple[str, ...], expected: Any):
    assert decide(lambda: Guard(AGENT, view(hide=hide)).check_asked(**{what: used})) == expected


QUERY = [
    pytest.param(FULL, None, id="text-and-key-shown"),
    pytest.param(view(hide=("text",)), denied("recall by a query or a context needs a view that shows the fields "
                                              "'text' and 'key'"), id="text-hidden"),
    pytest.param(view(hide=("key",)), denied("recall by a query or a context needs a view that shows the fields "
                                             "'text' and 'key'"), id="key-hidden"),
]


@pytest.mark.parametrize(("v", "expected"), QUERY)
def test_recall_by_text(v: View, expected: Any):
    assert decide(lambda: Guard(AGENT, v).check_query()) == expected


BY_ID = [
    pytest.param(AGENT, FULL, "alice", ReadFilter("alice", include_org=True, any_session=True, statuses=tuple(Status),
                                                  rules=rules_of(FULL)), id="every-state-and-the-organisation"),
    pytest.param(BOUND, FULL, "alice", ReadFilter("alice", include_org=False, any_session=True,
                                                  statuses=tuple(Status), rules=rules_of(FULL)),
                 id="bound-without-the-organisation"),
    pytest.param(AGENT, view(hide=("status",)), "alice", ReadFilter("alice", include_org=True, any_session=True,
                                                                    statuses=(Status.ACTIVE,), rules=rules_of(FULL)),
                 id="status-hidden-finds-only-active"),
    pytest.param(AGENT, PARTIAL, "alice", ReadFilter("alice", include_org=True, any_session=True,
                                                     statuses=tuple(Status), rules=rules_of(PARTIAL)),
                 id="within-the-rules"),
    pytest.param(AGENT, view(hide=("id",)), "alice", hidden("id"), id="id-hidden"),
    pytest.param(BOUND, FULL, "bob", denied("this credential is bound to another subject", "SUBJECT_NOT_ALLOWED"),
                 id="bound-other-subject"),
]


@pytest.mark.parametrize(("principal", "v", "subject", "expected"), BY_ID)
def test_a_look_up_by_id(principal: Principal, v: View, subject: str, expected: Any):
    assert decide(lambda: Guard(principal, v).by_id_filter(subject)) == expected


HISTORY = [
    pytest.param(FULL, ReadFilter("alice", include_org=True, any_session=True, statuses=tuple(Status),
                                  rules=rules_of(FULL)), id="version-shown"),
    pytest.param(view(hide=("version",)), denied("GetHistory needs a view that shows the field 'version'"),
                 id="version-hidden"),
    pytest.param(view(hide=("id",)), hidden("id"), id="id-hidden"),
]


@pytest.mark.parametrize(("v", "expected"), HISTORY)
def test_a_memorys_history(v: View, expected: Any):
    assert decide(lambda: Guard(AGENT, v).history_filter("alice")) == expected


# -- the score mask ---------------------------------------------------------------------------

NOTHING_MASKED = ScoreMask()
SCORE_MASK = [
    pytest.param((), NOTHING_MASKED, id="every-field-shown"),
    pytest.param(("importance",), replace(NOTHING_MASKED, importance=False), id="importance"),
    pytest.param(("pinned",), replace(NOTHING_MASKED, pinned=False), id="pinned"),
    pytest.param(("updated_at",), replace(NOTHING_MASKED, recency=False), id="updated_at"),
    pytest.param(("category",), replace(NOTHING_MASKED, recency=False, turns=False), id="category"),
    pytest.param(("last_access_at",), replace(NOTHING_MASKED, access=False), id="last_access_at"),
    pytest.param(("text",), replace(NOTHING_MASKED, text=False), id="text"),
    pytest.param(("provenance",), replace(NOTHING_MASKED, turns=False), id="provenance"),
    pytest.param(("created_at",), replace(NOTHING_MASKED, turns=False), id="created_at"),
    pytest.param(("scope",), replace(NOTHING_MASKED, turns=False), id="scope"),
    pytest.param(("session_id",), replace(NOTHING_MASKED, turns=False), id="session_id"),
    pytest.param(("tags",), replace(NOTHING_MASKED, entities=False), id="tags"),
    pytest.param(("id", "key", "data", "trust", "version", "access_count"), NOTHING_MASKED,
                 id="fields-no-score-reads"),
    pytest.param(tuple(ALL), ScoreMask(*(False,) * 7), id="every-field-hidden"),
]


@pytest.mark.parametrize(("hide", "expected"), SCORE_MASK)
def test_the_score_mask(hide: tuple[str, ...], expected: ScoreMask):
    assert Guard(AGENT, view(hide=hide)).score_mask() == expected


# -- admitting writes -------------------------------------------------------------------------

PREF = Draft(C.PREFERENCE, "Tea", key="diet")
GOAL = Draft(C.GOAL, "Run", key="sport")
NOTE = Draft(C.EVENT, "Met Bob")
RULE = Draft(C.CONSTRAINT, "No nuts", key="allergy")
WRITES_PREFS = (ViewRule(C.PREFERENCE, ("diet",)), ViewRule(C.EVENT), ViewRule(C.CONSTRAINT))

ADMIT = [
    pytest.param(AGENT, FULL, [PREF], [WriteItem(PREF, True, True)], id="read-and-compared"),
    pytest.param(AGENT, view((), WRITES_PREFS), [PREF], [WriteItem(PREF, False, False)], id="write-only-is-blind"),
    pytest.param(AGENT, view(hide=("importance",)), [PREF], [WriteItem(PREF, True, False)],
                 id="compared-field-hidden-is-blind"),
    pytest.param(AGENT, view(hide=("importance", "tags")), [RULE], [WriteItem(RULE, True, True)],
                 id="constraint-compares-text-alone"),
    pytest.param(AGENT, view(hide=("text",)), [NOTE], [WriteItem(NOTE, True, False)], id="event-text-hidden"),
    pytest.param(AGENT, view(write=WRITES_PREFS), [PREF, NOTE],
                 [WriteItem(PREF, True, True), WriteItem(NOTE, True, True)], id="several-items"),
    pytest.param(AGENT, FULL, [replace(PREF, scope=Scope.ORG)], [WriteItem(replace(PREF, scope=Scope.ORG), True, True)],
                 id="organisation-item"),
    pytest.param(AGENT, FULL, [replace(PREF, source_kind=SourceKind.INFERENCE)],
                 [WriteItem(replace(PREF, source_kind=SourceKind.INFERENCE), True, True)], id="weaker-source-kind"),
    pytest.param(AGENT, view(write=WRITES_PREFS), [GOAL],
                 denied("items[0]: no write rule of this agent's view allows category 'goal' with this key"),
                 id="no-write-rule"),
    pytest.param(AGENT, view(write=WRITES_PREFS), [replace(PREF, key="language")],
                 denied("items[0]: no write rule of this agent's view allows category 'preference' with this key"),
                 id="key-outside-write-rule"),
    pytest.param(AGENT, view(write=()), [PREF],
                 denied("items[0]: no write rule of this agent's view allows category 'preference' with this key"),
                 id="deny-by-default"),
    pytest.param(AGENT, view(write=WRITES_PREFS), [PREF, GOAL],
                 denied("items[1]: no write rule of this agent's view allows category 'goal' with this key"),
                 id="one-refused-item-refuses-all"),
    pytest.param(BOUND, FULL, [replace(PREF, scope=Scope.ORG)],
                 denied("items[0]: a subject-bound credential cannot write organisation memories",
                        "SUBJECT_NOT_ALLOWED"), id="bound-writing-the-organisation"),
    pytest.param(AGENT, FULL, [replace(PREF, source_kind=SourceKind.SYNC)],
                 denied("items[0]: this agent's view allows source kinds up to 'input', not 'sync'"),
                 id="source-kind-above-the-view-cap"),
]


@pytest.mark.parametrize(("principal", "v", "drafts", "expected"), ADMIT)
def test_admit(principal: Principal, v: View, drafts: list[Draft], expected: Any):
    assert decide(lambda: Guard(principal, v).admit(drafts)) == expected


TRUST = [
    pytest.param(SourceKind.INPUT, SourceKind.SYNC, SourceKind.INPUT, id="archive-claim-capped"),
    pytest.param(SourceKind.INPUT, SourceKind.INFERENCE, SourceKind.INFERENCE, id="weaker-claim-kept"),
    pytest.param(SourceKind.SYNC, SourceKind.SYNC, SourceKind.SYNC, id="allowed-claim-kept"),
]


@pytest.mark.parametrize(("most", "claimed", "kept"), TRUST)
def test_an_imported_items_trust(most: SourceKind, claimed: SourceKind, kept: SourceKind):
    assert Guard(AGENT, view(max_kind=most)).within_trust(replace(PREF, source_kind=claimed)) == replace(
        PREF, source_kind=kept)


QUEUE = [
    pytest.param(FULL, None, id="writes-allowed"),
    pytest.param(view(write=()), denied("this agent's view allows no writes, so nothing extracted could be kept"),
                 id="no-write-rule"),
]


@pytest.mark.parametrize(("v", "expected"), QUEUE)
def test_queueing_an_extraction(v: View, expected: Any):
    assert decide(lambda: Guard(AGENT, v).may_queue_extraction()) == expected


# -- the change check (ResolveConflict) -------------------------------------------------------

STORED = Memory("m1", "alice", Scope.SUBJECT, "", C.FACT, "home_city", "Paris", None, 0.5, 1.0, Stability.STABLE,
                False, (), None, None, "planner", SourceKind.INPUT, (), 2, Status.ACTIVE, T0, T0)
SETTLES = "resolving a conflict needs a view that shows the values it settles: the fields text, data, trust, " \
          "provenance and pending"
CHANGE = [
    pytest.param(FULL, None, id="written-and-seen-whole"),
    pytest.param(view(write=(ViewRule(C.FACT, ("home_*",)),)), None, id="write-rule-by-glob"),
    pytest.param(view(write=(ViewRule(C.FACT, ("work_*",)),)),
                 denied("no write rule of this agent's view allows changing this memory"), id="key-not-written"),
    pytest.param(view(write=(ViewRule(C.PREFERENCE),)),
                 denied("no write rule of this agent's view allows changing this memory"), id="category-not-written"),
    *(pytest.param(view(hide=(f,)), denied(SETTLES), id=f"{f}-hidden")
      for f in ("text", "data", "trust", "provenance", "pending")),
]


@pytest.mark.parametrize(("v", "expected"), CHANGE)
def test_the_change_check(v: View, expected: Any):
    assert decide(lambda: Guard(AGENT, v).check_change(STORED)) == expected


# -- the erase filter -------------------------------------------------------------------------

EVERYTHING = EraseSelector(all_of_subject=True)
BY_KEY = EraseSelector(key="home_city")
WHOLE = "needs a view whose read rules cover every category with the key pattern '*'"


def erased(subject: str, v: View, *, org: bool, statuses: tuple[Status, ...] = tuple(Status)) -> ReadFilter:
    return ReadFilter(subject, statuses=statuses, include_org=org, rules=rules_of(v))


ERASE = [
    # What an erase reaches.
    pytest.param(AGENT, FULL, "alice", EVERYTHING, False, erased("alice", FULL, org=True),
                 id="whole-subject-and-its-organisation-mentions"),
    pytest.param(BOUND, FULL, "alice", BY_KEY, False, erased("alice", FULL, org=False),
                 id="bound-credential-without-the-organisation"),
    pytest.param(AGENT, view(hide=("scope",)), "alice", BY_KEY, False,
                 erased("alice", view(hide=("scope",)), org=False), id="scope-hidden-without-the-organisation"),
    pytest.param(AGENT, view(hide=("status",)), "alice", BY_KEY, False,
                 erased("alice", FULL, org=True, statuses=(Status.ACTIVE,)), id="status-hidden-counts-only-active"),
    pytest.param(AGENT, FULL, "", EVERYTHING, True, erased("", FULL, org=True), id="the-organisation"),
    pytest.param(AGENT, PARTIAL, "alice", BY_KEY, False, erased("alice", PARTIAL, org=True), id="key-within-rules"),
    pytest.param(AGENT, view(selectors=("key",)), "alice", BY_KEY, False, erased("alice", FULL, org=True),
                 id="selector-allowed"),
    pytest.param(AGENT, FULL, "alice", EraseSelector(ids=("m1",)), False, erased("alice", FULL, org=True),
                 id="by-ids"),
    pytest.param(AGENT, FULL, "alice", EraseSelector(source_turn_id="t1"), False, erased("alice", FULL, org=True),
                 id="by-source-turn"),
    pytest.param(AGENT, FULL, "alice", EraseSelector(category=C.FACT), False, erased("alice", FULL, org=True),
                 id="by-category"),
    # Denials.
    pytest.param(AGENT, view(may_erase=False), "alice", BY_KEY, False,
                 denied("this agent's view does not allow erasing"), id="erase-not-allowed"),
    pytest.param(AGENT, view(selectors=("key",)), "alice", EraseSelector(source_turn_id="t1"), False,
                 denied("this agent's view does not allow erasing by source turn"), id="selector-not-allowed"),
    pytest.param(AGENT, view(selectors=("key",)), "alice", EVERYTHING, False,
                 denied("this agent's view does not allow erasing by all of subject"), id="whole-not-a-selector"),
    pytest.param(AGENT, view(hide=("id",)), "alice", EraseSelector(ids=("m1",)), False, hidden("id"),
                 id="ids-hidden"),
    pytest.param(AGENT, view(hide=("key",)), "alice", BY_KEY, False, hidden("key"), id="key-hidden"),
    pytest.param(AGENT, view(hide=("provenance",)), "alice", EraseSelector(source_turn_id="t1"), False,
                 hidden("provenance"), id="provenance-hidden"),
    pytest.param(AGENT, view(hide=("category",)), "alice", EraseSelector(category=C.FACT), False,
                 hidden("category"), id="category-hidden"),
    pytest.param(AGENT, PARTIAL, "alice", EraseSelector(category=C.GOAL), False,
                 denied("no read rule of this agent's view covers the category 'goal'"), id="category-outside-rules"),
    pytest.param(AGENT, PARTIAL, "alice", EraseSelector(key="iban"), False,
                 denied("no read rule of this agent's view allows the key 'iban'"), id="key-outside-rules"),
    pytest.param(AGENT, PARTIAL, "alice", EVERYTHING, False, denied(f"erasing a whole subject {WHOLE}"),
                 id="whole-subject-with-partial-reads"),
    pytest.param(AGENT, PARTIAL, "", EVERYTHING, True, denied(f"erasing the organisation's memories {WHOLE}"),
                 id="organisation-with-partial-reads"),
    pytest.param(BOUND, FULL, "", EVERYTHING, True,
                 denied("a subject-bound credential cannot erase organisation memories", "SUBJECT_NOT_ALLOWED"),
                 id="bound-erasing-the-organisation"),
    pytest.param(AGENT, view(hide=("scope",)), "", EVERYTHING, True, hidden("scope"), id="organisation-scope-hidden"),
    pytest.param(BOUND, FULL, "bob", BY_KEY, False,
                 denied("this credential is bound to another subject", "SUBJECT_NOT_ALLOWED"), id="bound-other-subject"),
]


@pytest.mark.parametrize(("principal", "v", "subject", "selector", "organisation", "expected"), ERASE)
def test_the_erase_filter(principal: Principal, v: View, subject: str, selector: EraseSelector, organisation: bool,
                          expected: Any):
    assert decide(lambda: Guard(principal, v).erase_filter(subject, selector, organisation=organisation)) == expected


# -- who may call at all ----------------------------------------------------------------------

ADMIN_CALLS = [
    pytest.param(ADMIN, None, id="admin"),
    pytest.param(Principal("acme", "ops", frozenset({"admin", "agent"})), None, id="admin-and-agent"),
    pytest.param(AGENT, denied("this call needs the admin role", "ROLE_REQUIRED"), id="agent-role-alone"),
    pytest.param(BOUND_ADMIN, denied("a credential bound to a subject cannot administer the tenant",
                                     "SUBJECT_NOT_ALLOWED"), id="bound-admin"),
]


@pytest.mark.parametrize(("principal", "expected"), ADMIN_CALLS)
def test_calling_an_admin_service(principal: Principal, expected: Any):
    assert decide(lambda: check_admin(principal)) == expected


NO_VIEW = denied("agent 'planner' has no view in this tenant, so it may do nothing; a tenant admin can give it one "
                 "(ViewAdminService.PutView, or 'memoryd views apply')", "VIEW_MISSING")
MEMORY_CALLS = [
    pytest.param(AGENT, FULL, ("planner", FULL), id="agent-with-a-view"),
    pytest.param(AGENT, None, NO_VIEW, id="agent-without-a-view"),
    pytest.param(Principal("acme", "planner", frozenset({"admin"})), None, NO_VIEW, id="admin-without-a-view"),
]


@pytest.mark.parametrize(("principal", "v", "expected"), MEMORY_CALLS)
def test_calling_the_memory_service(principal: Principal, v: View | None, expected: Any):
    def call() -> tuple[str, View]:
        guard = guard_for(principal, v)
        assert guard.principal == principal
        return guard.agent, guard.view

    assert decide(call) == expected


EXPORTS = [
    pytest.param(FULL, None, id="every-field"),
    pytest.param(view(fields=frozenset({"category", "key", "text"})), None, id="category-key-and-text"),
    pytest.param(view((ViewRule(C.EVENT), ViewRule(C.DECISION)), fields=frozenset({"category", "text"})), None,
                 id="episodic-alone-needs-no-key"),
    pytest.param(view(hide=("key",)), denied("exporting needs a view that shows category, key, text; this agent's "
                                             "view hides key"), id="key-hidden"),
    pytest.param(view((ViewRule(C.EVENT),), hide=("text", "category")),
                 denied("exporting needs a view that shows category, text; this agent's view hides category, text"),
                 id="episodic-text-and-category-hidden"),
]


@pytest.mark.parametrize(("v", "expected"), EXPORTS)
def test_exporting(v: View, expected: Any):
    assert decide(lambda: check_exportable(v)) == expected


# -- minting tokens ---------------------------------------------------------------------------

NOW = 1_800_000_000
HOUR = 3600
ADMIN_TOKEN = replace(ADMIN, token_expires=NOW + 2 * HOUR)


def asked(roles: frozenset[str] = frozenset({"agent"}), lifetime: int | None = None, subject: str = "") -> IssueTokenCommand:
    return IssueTokenCommand("writer", roles, subject, lifetime, "test")


def granted(roles: frozenset[str] = frozenset({"agent"}), expires: int = NOW + HOUR, subject: str = "") -> TokenGrant:
    return TokenGrant("acme", "writer", roles, subject, NOW, expires)


def too_long(left: int) -> Refused:
    return Refused("InvalidArgument", "INVALID_REQUEST",
                   f"invalid request: lifetime: must end by the expiry of the calling token ({left} s from now): a "
                   "minted token never outlives the one that minted it")


TOKENS = [
    pytest.param(ADMIN_TOKEN, asked(), granted(), id="default-hour"),
    pytest.param(replace(ADMIN, token_expires=NOW + 600), asked(), granted(expires=NOW + 600),
                 id="default-shortened-to-the-caller-token"),
    pytest.param(ADMIN, asked(lifetime=30 * 24 * HOUR), granted(expires=NOW + 30 * 24 * HOUR),
                 id="certificate-caller-no-expiry"),
    pytest.param(ADMIN_TOKEN, asked(frozenset({"admin", "agent"})), granted(frozenset({"admin", "agent"})),
                 id="admin-grants-admin-and-agent"),
    pytest.param(ADMIN_TOKEN, asked(subject="alice"), granted(subject="alice"), id="bound-token"),
    pytest.param(ADMIN_TOKEN, asked(lifetime=2 * HOUR), granted(expires=NOW + 2 * HOUR), id="up-to-the-caller-token"),
    pytest.param(AGENT, asked(), denied("this call needs the admin role", "ROLE_REQUIRED"), id="not-admin"),
    pytest.param(BOUND_ADMIN, asked(), denied("a credential bound to a subject cannot mint tokens",
                                              "SUBJECT_NOT_ALLOWED"), id="bound-admin"),
    pytest.param(ADMIN_TOKEN, asked(frozenset({"agent", "auditor"})),
                 denied("a minted token carries only roles the caller holds; yours lacks auditor", "ROLE_REQUIRED"),
                 id="role-the-caller-lacks"),
    pytest.param(ADMIN_TOKEN, asked(lifetime=2 * HOUR + 1), too_long(2 * HOUR), id="outliving-the-caller-token"),
    pytest.param(ADMIN, asked(lifetime=0), too_long(0), id="no-lifetime"),
]


@pytest.mark.parametrize(("principal", "cmd", "expected"), TOKENS)
def test_a_minted_tokens_grant(principal: Principal, cmd: IssueTokenCommand, expected: Any):
    assert decide(lambda: token_grant(principal, cmd, NOW)) == expected


# -- change streams (Watch) --------------------------------------------------------------------

WATCH = [
    pytest.param(AGENT, PARTIAL, "alice", False, (), False,
                 ReadFilter("alice", any_session=True, rules=rules_of(PARTIAL)), id="a-subject-every-session"),
    pytest.param(AGENT, FULL, "", True, (C.FACT,), True,
                 ReadFilter("", categories=(C.FACT,), include_org=True, any_session=True, rules=rules_of(FULL)),
                 id="every-subject-unbound"),
    pytest.param(BOUND, FULL, "", True, (), False,
                 denied("a credential bound to a subject cannot watch every subject", "SUBJECT_NOT_ALLOWED"),
                 id="every-subject-bound"),
    pytest.param(BOUND, FULL, "bob", False, (), False,
                 denied("this credential is bound to another subject", "SUBJECT_NOT_ALLOWED"), id="bound-other-subject"),
    pytest.param(AGENT, PARTIAL, "alice", False, (C.GOAL,), False,
                 denied("no read rule of this agent's view covers the category 'goal'"), id="category-outside-rules"),
    pytest.param(AGENT, view(hide=("scope",)), "alice", False, (), True, hidden("scope"), id="org-with-hidden-scope"),
]


@pytest.mark.parametrize(("principal", "v", "subject", "every", "categories", "org", "expected"), WATCH)
def test_what_a_watch_streams(principal: Principal, v: View, subject: str, every: bool,
                              categories: tuple[Category, ...], org: bool, expected: Any):
    assert decide(lambda: Guard(principal, v).watch_filter(subject, every, categories, org)) == expected


def _erased(category: Category | None, key: str | None, scope: Scope = Scope.SUBJECT) -> LoggedChange:
    return LoggedChange(7, ChangeKind.ERASED, "m-1", "" if scope is Scope.ORG else "alice", scope, "", category, 1, key)


SEES_ERASED = [
    pytest.param(PARTIAL, (), False, _erased(C.FACT, "home_city"), True, id="key-matching-a-glob"),
    pytest.param(PARTIAL, (), False, _erased(C.FACT, "iban"), False, id="key-outside-rules"),
    pytest.param(PARTIAL, (C.EVENT,), False, _erased(C.FACT, "home_city"), False, id="not-a-requested-category"),
    pytest.param(PARTIAL, (), False, _erased(C.EVENT, ""), True, id="episodic"),
    pytest.param(PARTIAL, (), False, _erased(C.FACT, None), False, id="unopenable-key-under-a-glob"),
    pytest.param(PARTIAL, (), False, _erased(C.EVENT, None), True, id="unopenable-key-under-every-key"),
    pytest.param(FULL, (), False, _erased(C.FACT, "x", Scope.ORG), False, id="organisation-not-asked"),
    pytest.param(FULL, (), True, _erased(C.FACT, "x", Scope.ORG), True, id="organisation-asked"),
]


@pytest.mark.parametrize(("v", "categories", "org", "change", "expected"), SEES_ERASED)
def test_which_purged_memories_a_watcher_is_told_of(v: View, categories: tuple[Category, ...], org: bool,
                                                     change: LoggedChange, expected: bool):
    guard = Guard(AGENT, v)
    assert guard.sees_erased(guard.watch_filter("alice", False, categories, org), change) is expected


@pytest.mark.parametrize(("v", "expected"), [(FULL, True), (NO_READS, False)], ids=["reads-something", "reads-nothing"])
def test_who_is_told_a_subject_was_erased(v: View, expected: bool):
    assert Guard(AGENT, v).sees_subject_erased() is expected
