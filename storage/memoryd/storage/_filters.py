"""The one filter compiler: a view-narrowed, labelled ``ReadFilter`` as SQL and as a Milvus
expression.

One predicate — the view's rules, the request's filter, visibility (subject, organisation,
session) and liveness (active, unexpired, valid) — compiled for each store:

- ``read_conditions``: the WHERE clause every Postgres read shares (``live_at``: with
  liveness at the caller's clock).
- ``filter_expression``: the same for Milvus, filter first.

Liveness is defined once, here (``LIVE_AT``, ``LIVE_NOW``), and what a write meets uses the
same definition (``_writes``): a write never finds equal, merges into, counts or holds a value
pending against a memory that no read would serve.

Keys and tags are stored only as keyed labels (and sealed), so both compile the filter's
``labels`` (``_labels.label_filter``): exact label sets, no pattern matching in either
store, so the two agree exactly (``tests/storage/test_filter_compiler.py`` checks this as a
property) and the dense channel's top hits are the top hits of exactly what the caller
reads. A filter without labels is refused: a forgotten labelling step fails closed.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Protocol

from psycopg import sql

from memoryd.domain import CONTROL_CHARACTERS, FilterLabels, Internal, ReadFilter


def _live(at: str) -> str:
    return (f"status = 'active' AND (valid_until IS NULL OR valid_until > {at}) "
            f"AND (expires_at IS NULL OR expires_at > {at})")


# A memory every read may serve at a moment: active, still valid and unexpired — even before
# the lifecycle sweeper marks an expired one forgotten. At the caller's clock (two
# placeholders: the time, twice), or at the transaction's (what a write meets).
LIVE_AT = _live("%s")
LIVE_NOW = _live("now()")


def literal(value: str) -> str:
    """A string literal for a Milvus expression: backslashes and quotes escaped, control
    characters refused, so no value can change the expression's structure."""
    if CONTROL_CHARACTERS.search(value):
        raise Internal("refusing a control character in a vector-index expression")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def literal_list(values: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(literal(v) for v in values) + "]"


def in_states(flt: ReadFilter, now: datetime, *, table: str = "") -> tuple[sql.Composable, list[Any]]:
    """A listed memory (MemoryView, and the memory a GetHistory names): in one of ``flt``'s
    statuses, and, if active, not past its time to live (a lapsed validity is still listed:
    it dates a value, it does not remove it). ``table`` qualifies the columns."""
    status, expires = (sql.Identifier(*filter(None, (table, column))) for column in ("status", "expires_at"))
    return (sql.SQL("{s} = ANY(%s) AND ({s} <> 'active' OR {e} IS NULL OR {e} > %s)").format(s=status, e=expires),
            [[s.value for s in flt.statuses], now])


def labels_of(flt: ReadFilter) -> FilterLabels:
    if flt.labels is None:
        raise Internal("a read filter reached a store without its key labels")
    return flt.labels


def rules_condition(flt: ReadFilter) -> tuple[sql.Composable, list[Any]]:
    """The view's rules as SQL: a row passes if one rule allows its category and key label."""
    alternatives: list[sql.Composable] = []
    params: list[Any] = []
    for category, labels in labels_of(flt).rules:
        if labels is None:
            alternatives.append(sql.SQL("category = %s"))
            params.append(category.value)
        elif labels:
            alternatives.append(sql.SQL("(category = %s AND key_label = ANY(%b))"))
            params += [category.value, [bytes.fromhex(label) for label in labels]]
    if not alternatives:
        return sql.SQL("false"), []
    return sql.SQL("({})").format(sql.SQL(" OR ").join(alternatives)), params


def visibility_conditions(flt: ReadFilter) -> tuple[list[sql.Composable], list[Any]]:
    """Whose memories a read sees — the subject's (and the organisation's, if asked), of which
    sessions — over the columns ``subject``, ``scope`` and ``session_id``."""
    parts: list[sql.Composable] = []
    if flt.include_org:
        parts.append(sql.SQL("(subject = %s OR (subject = '' AND scope = 'org'))"))
    else:
        parts.append(sql.SQL("subject = %s AND scope <> 'org'"))
    params: list[Any] = [flt.subject]
    if flt.session_id and not flt.any_session:
        parts.append(sql.SQL("(scope <> 'session' OR session_id = %s)"))
        params.append(flt.session_id)
    elif not flt.any_session:
        parts.append(sql.SQL("scope <> 'session'"))
    return parts, params


class Tenanted(Protocol):
    """What a read is made in — a tenant's transaction (``TenantConn``), session or index
    partition — as the filter compilers name its tenant."""

    @property
    def tenant(self) -> str: ...


def read_conditions(scope: Tenanted, flt: ReadFilter, *,
                    live_at: datetime | None = None) -> tuple[sql.Composable, list[Any]]:
    """The WHERE clause of a read in ``scope``: its tenant (besides RLS), subject/org/session,
    the filter, and with ``live_at`` liveness at that time (``LIVE_AT``).

    Every read path uses this one function, so a filter field cannot be forgotten on one path.
    """
    labels = labels_of(flt)
    rules, params = rules_condition(flt)
    seen, seen_params = visibility_conditions(flt)
    parts: list[sql.Composable] = [sql.SQL("tenant_id = %s"), rules, *seen]
    params = [scope.tenant, *params, *seen_params]
    if flt.categories:
        parts.append(sql.SQL("category = ANY(%s)"))
        params.append([c.value for c in flt.categories])
    if flt.keys:
        parts.append(sql.SQL("key_label = ANY(%b)"))
        params.append([bytes.fromhex(label) for label in labels.keys])
    if flt.tags:
        parts.append(sql.SQL("tag_labels @> %b"))
        params.append([bytes.fromhex(label) for label in labels.tags])
    if flt.updated_after is not None:
        parts.append(sql.SQL("updated_at >= %s"))
        params.append(flt.updated_after)
    if flt.updated_before is not None:
        parts.append(sql.SQL("updated_at < %s"))
        params.append(flt.updated_before)
    if live_at is not None:
        parts.append(sql.SQL(LIVE_AT))
        params += [live_at, live_at]
    return sql.SQL(" AND ").join(parts), params


def filter_expression(scope: Tenanted, flt: ReadFilter, now: datetime) -> str:
    """The labelled read filter in ``scope``'s tenant as a Milvus boolean expression (filter first, then search):
    the same predicate as ``read_conditions``, over the labels the index stores in its
    ``key`` and ``tags`` fields ("" for no key)."""
    labels = labels_of(flt)
    # Times are whole seconds in the index, rounded so the index keeps a little more than
    # Postgres would, never less (valid_until and updated_at are stored rounded down).
    parts = [f"tenant == {literal(scope.tenant)}", 'status == "active"',
             f"(valid_until == 0 or valid_until >= {math.floor(now.timestamp())})"]
    if flt.include_org:
        parts.append(f'(subject == {literal(flt.subject)} or (subject == "" and scope == "org"))')
    else:
        parts.append(f'subject == {literal(flt.subject)} and scope != "org"')
    if flt.session_id and not flt.any_session:
        parts.append(f'(scope != "session" or session_id == {literal(flt.session_id)})')
    elif not flt.any_session:
        parts.append('scope != "session"')
    if flt.categories:
        parts.append(f"category in {literal_list([c.value for c in flt.categories])}")
    if flt.keys:
        parts.append(f"key in {literal_list(labels.keys)}")
    if flt.tags:
        parts.append(f"array_contains_all(tags, {literal_list(labels.tags)})")
    if flt.updated_after is not None:
        parts.append(f"updated_at >= {math.floor(flt.updated_after.timestamp())}")
    if flt.updated_before is not None:
        parts.append(f"updated_at < {math.ceil(flt.updated_before.timestamp())}")
    rules = []
    for category, allowed in labels.rules:
        if allowed is None:
            rules.append(f"category == {literal(category.value)}")
        elif allowed:
            rules.append(f"(category == {literal(category.value)} and key in {literal_list(allowed)})")
    parts.append("(" + " or ".join(rules) + ")" if rules else "false")
    return " and ".join(parts)
