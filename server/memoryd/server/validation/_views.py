"""Validation of the view administration requests (ViewAdminService).

As in the whole package, every invalid field is reported at once; a view
that passes is well-formed (known categories and fields, sane patterns), whether or not it
is wise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memoryd.domain import CONTRACT, MEMORY_FIELDS, FieldViolation, SourceKind, View, ViewRule
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import view_admin_service_pb2 as admin

from .._config import Limits
from .._enums import CATEGORY, ERASE_SELECTOR, SOURCE_KIND
from ._checker import Checker

# A key pattern is a key in which `*` may stand for any run of characters.
KEY_PATTERN = re.compile(r"^(\*|[A-Za-z0-9*][A-Za-z0-9._:/*-]*)$")
MAX_RULES = 64
MAX_PATTERNS = 32
MAX_DESCRIPTION_BYTES = 512


@dataclass(frozen=True)
class PutViewCommand:
    view: View
    expected_version: int


@dataclass(frozen=True)
class AgentCommand:
    agent: str


@dataclass(frozen=True)
class ListViewsCommand:
    page_size: int
    page_token: str


def _agent(check: Checker, field: str, value: str) -> str:
    return check.identifier(field, value, CONTRACT.agent, required=True)


def _rules(check: Checker, field: str, rules: Any) -> tuple[ViewRule, ...]:
    if len(rules) > MAX_RULES:
        check.fail(field, f"must have at most {MAX_RULES} rules")
        return ()
    out = []
    for i, rule in enumerate(rules):
        category = check.enum(f"{field}[{i}].category", rule.category, CATEGORY.to_domain, required=True)
        patterns = list(rule.key_patterns) or ["*"]
        if len(patterns) > MAX_PATTERNS:
            check.fail(f"{field}[{i}].key_patterns", f"must have at most {MAX_PATTERNS} patterns")
            continue
        for j, pattern in enumerate(patterns):
            check.text(f"{field}[{i}].key_patterns[{j}]", pattern, check.limits.max_key_bytes, required=True,
                       pattern=KEY_PATTERN, what="a key, where * matches any run of characters")
        if category is not None:
            out.append(ViewRule(category, tuple(dict.fromkeys(patterns))))
    return tuple(out)


def view_from_message(check: Checker, field: str, message: pb.View) -> View:
    agent = _agent(check, f"{field}.agent", message.agent)
    read = _rules(check, f"{field}.read_rules", message.read_rules)
    write = _rules(check, f"{field}.write_rules", message.write_rules)
    fields = []
    for i, name in enumerate(message.visible_fields):
        if name not in MEMORY_FIELDS:
            check.fail(f"{field}.visible_fields[{i}]", f"'{name[:64]}' is not a field of memoryd.v1.Memory")
        fields.append(name)
    selectors = []
    for i, number in enumerate(message.erase_selectors):
        name = check.enum(f"{field}.erase_selectors[{i}]", number, ERASE_SELECTOR.to_domain, required=True)
        if name is not None:
            selectors.append(name)
    if selectors and not message.may_erase:
        check.fail(f"{field}.erase_selectors", "must be empty unless may_erase is true")
    description = check.text(f"{field}.description", message.description, MAX_DESCRIPTION_BYTES)
    max_source_kind = check.enum(f"{field}.max_source_kind", message.max_source_kind, SOURCE_KIND.to_domain)
    return View(agent=agent, read_rules=read, write_rules=write, may_erase=message.may_erase,
                visible_fields=frozenset(fields), description=description, erase_selectors=frozenset(selectors),
                max_source_kind=max_source_kind or SourceKind.INPUT)


def read_view(message: pb.View) -> tuple[View, list[FieldViolation]]:
    """``message`` read by the server's own rules, and every rule it breaks: for tools (the
    ``memoryd views`` command) that check a view before sending it or read one the server sent."""
    check = Checker(Limits())
    view = view_from_message(check, "view", message)
    return view, check.violations


def validate_put_view(request: admin.PutViewRequest, limits: Limits) -> PutViewCommand:
    check = Checker(limits)
    if not request.HasField("view"):
        check.fail("view", "is required")
    view = view_from_message(check, "view", request.view)
    if request.expected_version < 0:
        check.fail("expected_version", "must not be negative")
    check.done()
    return PutViewCommand(view, request.expected_version)


def validate_agent(request: admin.GetViewRequest | admin.DeleteViewRequest, limits: Limits) -> AgentCommand:
    check = Checker(limits)
    agent = _agent(check, "agent", request.agent)
    check.done()
    return AgentCommand(agent)


def validate_list_views(request: admin.ListViewsRequest, limits: Limits) -> ListViewsCommand:
    check = Checker(limits)
    size = check.page_size("page_size", request.page_size)
    token = check.text("page_token", request.page_token, 1024)
    check.done()
    return ListViewsCommand(size, token)
