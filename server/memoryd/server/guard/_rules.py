"""The guard's decisions: what one caller may read, write and erase, and what may shape an answer.

A ``Guard`` is built for each call from the principal (the credential's tenant, agent, roles
and subject binding) and the agent's stored view. It is pure: it looks nothing up, so every
decision depends on the credential, the view and the request alone — never on what is
stored. Use cases ask it before they touch a store; ``memoryd.server.present`` builds every
answer from its decisions (``visible``, ``score_mask``, ``WriteItem``) and decides nothing.

Reads. The request's filter is narrowed to the view's read rules and pushed down into every
store query (filter first). A category or key the caller names outside its rules is refused
before anything is read. A request may select, filter, order, count and tie-break only on
what the view shows, so naming a field the view hides is refused too — a category, key, tag,
time range, status, organisation scope or session, a memory id (GetHistory, ResolveConflict,
an erase by ids), a source turn or key to erase by — since the answer would tell which
memories hold that value (``ASKED_FIELDS``). Free-text recall ranks by the text and key, so
it needs both visible.

Ranking. What a caller cannot see must not order what it can: ``score_mask`` says which
stored fields may shape a score (importance, pinned, recency from updated_at and category,
access from last_access_at, text for de-duplication and the token budget).

Writes. Trust comes from the view (``max_source_kind``), never from the request. A Write's
answer is about what is stored, so it follows what the view covers:

- an item whose category and key the view does not read is *blind*: it never meets a stored
  memory (an episodic item or a constraint becomes a memory of its own, CREATED; a keyed
  value is ACCEPTED, without id or version), so its answer is the same whatever is stored;
- an item the view reads is compared with what is stored (an exact repeat, the same value,
  the same constraint) only when the view shows every field the comparison looks at;
  otherwise it is written as new information (a new memory, or a new version of the key);
- its answer then shows the memory id only with ``id`` visible, the version only with
  ``version``, and says whether a value replaced the current one or waits pending only with
  ``trust`` visible (which of the two happened depends on the stored value's trust).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memoryd.domain import (
    Category,
    Draft,
    EraseSelector,
    LoggedChange,
    Memory,
    PermissionDenied,
    Policy,
    ReadFilter,
    Scope,
    ScoreMask,
    Status,
    View,
    policy_for,
)

from .._auth import Principal

# The field a request must be able to see to select memories by it (READ filters, erase
# selectors, look-ups by id): the answer tells which memories hold the value.
ASKED_FIELDS = {
    "categories": "category", "keys": "key", "tags": "tags", "time range": "updated_at", "statuses": "status",
    "include_org": "scope", "session_id": "session_id", "ids": "id", "key": "key", "source_turn": "provenance",
    "category": "category", "memory_id": "id",
}

# The fields a write compares with what is stored, by the category's policy: a caller must see
# all of them (for a category and key it reads) for its item to be found equal or merged.
COMPARED_FIELDS = {
    Policy.LAST_WRITE_WINS: frozenset({"text", "data", "importance", "confidence", "stability", "pinned", "tags",
                                       "valid_from", "valid_until"}),
    Policy.VERSIONED: frozenset({"text", "data", "importance", "confidence", "stability", "pinned", "tags",
                                 "valid_from", "valid_until"}),
    Policy.ACCUMULATE: frozenset({"text"}),
    Policy.APPEND: frozenset({"text"}),
}


def write_item(view: View, draft: Draft) -> WriteItem:
    """How ``view``'s agent writes ``draft``: whether it reads it, and whether the store may
    compare it with what is stored."""
    readable = view.may_read(draft.category, draft.key)
    return WriteItem(draft, readable, readable and COMPARED_FIELDS[policy_for(draft.category)] <= view.visible_fields)


@dataclass(frozen=True)
class WriteItem:
    """A draft the view allows: whether the view reads it, and whether the store may compare
    it with what is stored (``blind`` when it may not)."""

    draft: Draft
    readable: bool
    compares: bool

    @property
    def blind(self) -> bool:
        return not self.compares


class Guard:
    """One caller's permissions for one call."""

    def __init__(self, principal: Principal, view: View) -> None:
        self.principal = principal
        self.view = view
        self.visible = view.visible_fields

    @property
    def tenant(self) -> str:
        return self.principal.tenant

    @property
    def agent(self) -> str:
        return self.principal.agent

    def shows(self, *fields: str) -> bool:
        return all(name in self.visible for name in fields)

    # -- identity ---------------------------------------------------------------------------

    def check_subject(self, subject: str) -> None:
        bound = self.principal.subject
        if bound and subject != bound:
            raise PermissionDenied("this credential is bound to another subject", reason="SUBJECT_NOT_ALLOWED")

    # -- reads ------------------------------------------------------------------------------

    def read_filter(self, flt: ReadFilter, keys: tuple[str, ...] | list[str] = ()) -> ReadFilter:
        """The request's filter restricted to what the view reads (refusing, from the view
        alone, a category or key it names outside the rules, or a filter on a hidden field)."""
        self.check_subject(flt.subject)
        if flt.include_org and self.principal.subject:
            raise PermissionDenied("a subject-bound credential cannot read organisation memories",
                                   reason="SUBJECT_NOT_ALLOWED")
        self.check_asked(categories=bool(flt.categories), keys=bool(flt.keys or keys), tags=bool(flt.tags),
                         statuses=flt.statuses != (Status.ACTIVE,), include_org=flt.include_org,
                         session_id=bool(flt.session_id),
                         **{"time range": flt.updated_after is not None or flt.updated_before is not None})
        for category in flt.categories:
            self.check_category(category)
        for key in (*flt.keys, *keys):
            if not self.view.may_read_key(key, flt.categories):
                within = " within the requested categories" if flt.categories else ""
                raise PermissionDenied(f"no read rule of this agent's view allows the key '{key}'{within}")
        return self._within_rules(flt)

    def _within_rules(self, flt: ReadFilter) -> ReadFilter:
        return replace(flt, rules=tuple((r.category, r.key_patterns) for r in self.view.read_rules))

    def check_asked(self, **asked: bool) -> None:
        """Refuse, from the view alone, selecting memories by a field the view hides
        (``ASKED_FIELDS``): each keyword names what the request selects by."""
        for what, used in asked.items():
            field = ASKED_FIELDS[what]
            if used and field not in self.visible:
                raise PermissionDenied(f"this agent's view hides the field '{field}', so it cannot filter, look up "
                                       "or select memories by it")

    def check_category(self, category: Category) -> None:
        if not self.view.may_read_category(category):
            raise PermissionDenied(f"no read rule of this agent's view covers the category '{category.value}'")

    def check_query(self) -> None:
        """Free text (a query, a conversation's turns) is matched against a memory's key and
        text: ranking by them would tell what they hold, so a view must show both to search by
        words or meaning."""
        if not self.shows("text", "key"):
            raise PermissionDenied("recall by a query or a context needs a view that shows the fields 'text' and "
                                   "'key'")

    def by_id_filter(self, subject: str) -> ReadFilter:
        """Everything of the subject the view reads, in every session (and the organisation's,
        unless the credential is bound to the subject): how one memory is looked up by the id
        the caller names, which the view must show. A memory is found in the states the view
        can tell apart: only while active when it hides ``status``."""
        self.check_subject(subject)
        self.check_asked(memory_id=True)
        statuses = tuple(Status) if "status" in self.visible else (Status.ACTIVE,)
        return self._within_rules(ReadFilter(subject=subject, include_org=not self.principal.subject,
                                             any_session=True, statuses=statuses))

    def history_filter(self, subject: str) -> ReadFilter:
        """A memory's versions: their number is its version, so the view must show it."""
        if "version" not in self.visible:
            raise PermissionDenied("GetHistory needs a view that shows the field 'version'")
        return self.by_id_filter(subject)

    # -- change streams ---------------------------------------------------------------------

    def watch_filter(self, subject: str, all_subjects: bool, categories: tuple[Category, ...],
                     include_org: bool) -> ReadFilter:
        """What a Watch streams, decided as a read of the subject (every session) would be:
        the same refusals, the same rules. Every subject's changes only for a credential bound
        to none (``subject`` is then '')."""
        if all_subjects and self.principal.subject:
            raise PermissionDenied("a credential bound to a subject cannot watch every subject",
                                   reason="SUBJECT_NOT_ALLOWED")
        return self.read_filter(ReadFilter(subject=subject, categories=categories, include_org=include_org,
                                           any_session=True))

    def sees_erased(self, flt: ReadFilter, change: LoggedChange) -> bool:
        """Whether the view read the purged memory ``change`` names, as ``flt`` (``watch_filter``)
        would have: the organisation's only if asked for, the request's categories, and the
        rules on its category and key. A key that cannot be opened any more is matched only by
        a rule that allows every key of the category."""
        if change.category is None or (change.scope is Scope.ORG and not flt.include_org):
            return False
        if flt.categories and change.category not in flt.categories:
            return False
        if change.key is None:
            return any(r.category is change.category and "*" in r.key_patterns for r in self.view.read_rules)
        return self.view.may_read(change.category, change.key)

    def sees_subject_erased(self) -> bool:
        """A subject's erasure is told to a watcher whose view reads anything at all: it may
        have read some of what went."""
        return bool(self.view.read_rules)

    def score_mask(self) -> ScoreMask:
        """Which stored fields may shape a recall's scores, order and budget."""
        return ScoreMask(importance=self.shows("importance"), pinned=self.shows("pinned"),
                         recency=self.shows("updated_at", "category"), access=self.shows("last_access_at"),
                         text=self.shows("text"),
                         turns=self.shows("provenance", "created_at", "category", "scope", "session_id"),
                         entities=self.shows("tags"))

    # -- writes -----------------------------------------------------------------------------

    def admit(self, drafts: list[Draft]) -> list[WriteItem]:
        """The drafts as items to write; PERMISSION_DENIED (nothing written) if any is not
        allowed: its category and key, its scope, or the source kind it asserts."""
        items = []
        for i, draft in enumerate(drafts):
            if draft.scope is Scope.ORG and self.principal.subject:
                raise PermissionDenied(f"items[{i}]: a subject-bound credential cannot write organisation memories",
                                       reason="SUBJECT_NOT_ALLOWED")
            if not self.view.may_write(draft.category, draft.key):
                raise PermissionDenied(f"items[{i}]: no write rule of this agent's view allows category "
                                       f"'{draft.category.value}' with this key")
            if not self.view.may_assert(draft.source_kind):
                raise PermissionDenied(f"items[{i}]: this agent's view allows source kinds up to "
                                       f"'{self.view.max_source_kind.value}', not '{draft.source_kind.value}'")
            items.append(write_item(self.view, draft))
        return items

    def within_trust(self, draft: Draft) -> Draft:
        """An imported draft asserts no more than the view allows: an archive's provenance
        is the exporter's claim, not this caller's."""
        if self.view.may_assert(draft.source_kind):
            return draft
        return replace(draft, source_kind=self.view.max_source_kind)

    def may_queue_extraction(self) -> None:
        if not self.view.write_rules:
            raise PermissionDenied("this agent's view allows no writes, so nothing extracted could be kept")

    def check_change(self, memory: Memory) -> None:
        """ResolveConflict changes a memory: the view must write it, and see it whole (the
        pending values it settles are compared with the current one)."""
        if not self.view.may_write(memory.category, memory.key):
            raise PermissionDenied("no write rule of this agent's view allows changing this memory")
        if not {"text", "data", "trust", "provenance", "pending"} <= self.visible:
            raise PermissionDenied("resolving a conflict needs a view that shows the values it settles: the fields "
                                   "text, data, trust, provenance and pending")

    # -- erase ------------------------------------------------------------------------------

    def erase_filter(self, subject: str, selector: EraseSelector, *, organisation: bool = False) -> ReadFilter:
        """What an erase may reach: the subject's memories the view reads — or, with
        ``organisation``, the organisation's (subject '') — by a selector the view allows and
        on a field it shows (decided before anything is read). Its statuses are those the
        receipt may count: forgotten memories only for a view showing ``status``. A subject's
        filter includes the organisation when the caller may read it (not bound to a subject,
        ``scope`` shown): the receipt then says which organisation memories name the subject."""
        if organisation and self.principal.subject:
            raise PermissionDenied("a subject-bound credential cannot erase organisation memories",
                                   reason="SUBJECT_NOT_ALLOWED")
        self.check_asked(include_org=organisation)
        statuses = tuple(Status) if "status" in self.visible else (Status.ACTIVE,)
        reads_org = organisation or (not self.principal.subject and self.shows("scope"))
        flt = replace(self.read_filter(ReadFilter(subject=subject)), statuses=statuses, include_org=reads_org)
        kind = selector.kind
        if not self.view.may_erase:
            raise PermissionDenied("this agent's view does not allow erasing")
        if not self.view.may_erase_with(kind):
            raise PermissionDenied(f"this agent's view does not allow erasing by {kind.replace('_', ' ')}")
        if kind != "all_of_subject":
            self.check_asked(**{kind: True})
        if selector.category is not None:
            self.check_category(selector.category)
        if selector.key and not self.view.may_read_key(selector.key):
            raise PermissionDenied(f"no read rule of this agent's view allows the key '{selector.key}'")
        if selector.all_of_subject and not self.view.reads_everything():
            whole = "the organisation's memories" if organisation else "a whole subject"
            raise PermissionDenied(f"erasing {whole} needs a view whose read rules cover every category "
                                   "with the key pattern '*'")
        return flt
