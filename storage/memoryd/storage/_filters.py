"""The one filter compiler: a view-narrowed ``ReadFilter`` as SQL, as a Milvus expression,
and as an exact predicate on (category, key).

One predicate — the view's rules, the request's filter, visibility (subject, organisation,
session) and liveness (active, unexpired, valid) — compiled for each store:

- ``read_conditions``: the WHERE clause every Postgres read shares. Exact.
- ``filter_expression``: the same for Milvus, filter first. Milvus's ``like`` has no escape
  character (Milvus Lite's Python evaluator treats ``_`` and ``%`` as wildcards whatever
  precedes them), so a key pattern with ``_`` matches a little more there, never less: the
  expression's hits are a superset of Postgres's (``tests/storage/test_filter_compiler.py``
  checks this as a property).
- ``rules_allow``: the rules' exact verdict on one (category, key), which the vector search
  applies to every hit (``index_is_exact`` says when it must), so the dense channel's top
  hits are the top hits of exactly what the caller reads — a memory it cannot read never
  takes one of their places.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from psycopg import sql

from memoryd.domain import CONTROL_CHARACTERS, Category, Internal, ReadFilter, glob_to_like, glob_to_regex

Rules = tuple[tuple[Category, tuple[str, ...]], ...]


def literal(value: str) -> str:
    """A string literal for a Milvus expression: backslashes and quotes escaped, control
    characters refused, so no value can change the expression's structure."""
    if CONTROL_CHARACTERS.search(value):
        raise Internal("refusing a control character in a vector-index expression")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def literal_list(values: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(literal(v) for v in values) + "]"


def rules_allow(rules: Rules, category: Category | str, key: str) -> bool:
    """Whether one of the view's rules allows a memory of ``category`` with ``key``."""
    return any(c.value == str(category) and ("*" in patterns or not patterns
                                            or any(glob_to_regex(p).fullmatch(key) for p in patterns))
               for c, patterns in rules)


def index_is_exact(rules: Rules) -> bool:
    """Whether ``filter_expression`` expresses the rules exactly (no wildcard in a pattern)."""
    return not any("_" in p or "%" in p for _, patterns in rules if "*" not in patterns for p in patterns)


def rules_condition(rules: tuple[tuple[Category, tuple[str, ...]], ...]) -> tuple[sql.Composable, list[Any]]:
    """The view's rules as SQL: a row passes if one rule allows its category and key."""
    if not rules:
        return sql.SQL("false"), []
    alternatives: list[sql.Composable] = []
    params: list[Any] = []
    for category, patterns in rules:
        if "*" in patterns or not patterns:
            alternatives.append(sql.SQL("category = %s"))
            params.append(category.value)
            continue
        likes = sql.SQL(" OR ").join(sql.SQL("key LIKE %s ESCAPE '\\'") for _ in patterns)
        alternatives.append(sql.SQL("(category = %s AND ({}))").format(likes))
        params += [category.value, *(glob_to_like(p) for p in patterns)]
    return sql.SQL("({})").format(sql.SQL(" OR ").join(alternatives)), params


def read_conditions(tenant: str, flt: ReadFilter) -> tuple[sql.Composable, list[Any]]:
    """The WHERE clause of a read: tenant (besides RLS), subject/org/session, and the filter.

    Every read path uses this one function, so a filter field cannot be forgotten on one path.
    """
    rules, params = rules_condition(flt.rules)
    parts: list[sql.Composable] = [sql.SQL("tenant_id = %s"), rules]
    params.insert(0, tenant)
    if flt.include_org:
        parts.append(sql.SQL("(subject = %s OR (subject = '' AND scope = 'org'))"))
    else:
        parts.append(sql.SQL("subject = %s AND scope <> 'org'"))
    params.append(flt.subject)
    if flt.session_id and not flt.any_session:
        parts.append(sql.SQL("(scope <> 'session' OR session_id = %s)"))
        params.append(flt.session_id)
    elif not flt.any_session:
        parts.append(sql.SQL("scope <> 'session'"))
    if flt.categories:
        parts.append(sql.SQL("category = ANY(%s)"))
        params.append([c.value for c in flt.categories])
    if flt.keys:
        parts.append(sql.SQL("key = ANY(%s)"))
        params.append(list(flt.keys))
    if flt.tags:
        parts.append(sql.SQL("tags @> %s"))
        params.append(list(flt.tags))
    if flt.updated_after is not None:
        parts.append(sql.SQL("updated_at >= %s"))
        params.append(flt.updated_after)
    if flt.updated_before is not None:
        parts.append(sql.SQL("updated_at < %s"))
        params.append(flt.updated_before)
    return sql.SQL(" AND ").join(parts), params


def filter_expression(tenant: str, flt: ReadFilter, now: datetime) -> str:
    """The view-narrowed read filter as a Milvus boolean expression (filter first, then search).

    It mirrors ``_rows.read_conditions``; where Milvus is coarser (``like`` treats ``_`` as a
    wildcard) it may let a little more through, never less — the Postgres re-read is exact.
    """
    # Times are whole seconds in the index, rounded so the index keeps a little more than
    # Postgres would, never less (valid_until and updated_at are stored rounded down).
    parts = [f"tenant == {literal(tenant)}", 'status == "active"',
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
        parts.append(f"key in {literal_list(list(flt.keys))}")
    if flt.tags:
        parts.append(f"array_contains_all(tags, {literal_list(list(flt.tags))})")
    if flt.updated_after is not None:
        parts.append(f"updated_at >= {math.floor(flt.updated_after.timestamp())}")
    if flt.updated_before is not None:
        parts.append(f"updated_at < {math.ceil(flt.updated_before.timestamp())}")
    rules = []
    for category, patterns in flt.rules:
        if "*" in patterns or not patterns:
            rules.append(f"category == {literal(category.value)}")
        else:
            likes = " or ".join(f"key like {literal(p.replace('*', '%'))}" for p in patterns)
            rules.append(f"(category == {literal(category.value)} and ({likes}))")
    parts.append("(" + " or ".join(rules) + ")" if rules else "false")
    return " and ".join(parts)
