"""Validation of the view administration requests (ViewAdminService).

As in the whole package, every invalid field is reported at once; a view
that passes is well-formed (known categories and fields, sane patterns), whether or not it
is wise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryd.domain import MEMORY_FIELDS, FieldViolation, SourceKind, View, ViewRule
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import view_admin_service_pb2 as admin

from .._config import Limits
from .._enums import CATEGORY, ERASE_SELECTOR, SOURCE_KIND
from ._checker import Checker



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


def _rules(check: Checker, field: str, rules: Any) -> tuple[ViewRule, ...]:
    out = []
    for i, rule in enumerate(rules):
        category = check.enum(f"{field}[{i}].category", rule.category, CATEGORY.to_domain, required=True)
        patterns = list(rule.key_patterns) or ["*"]
        for j, pattern in enumerate(patterns):  # the pattern's grammar is an annotated rule
            check.text(f"{field}[{i}].key_patterns[{j}]", pattern, check.limits.max_key_bytes)
        if category is not None:
            out.append(ViewRule(category, tuple(dict.fromkeys(patterns))))
    return tuple(out)


def view_from_message(check: Checker, field: str, message: pb.View) -> View:
    agent = message.agent  # its grammar is an annotated rule, as every fixed one (_schema)
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
    description = message.description
    max_source_kind = check.enum(f"{field}.max_source_kind", message.max_source_kind, SOURCE_KIND.to_domain)
    return View(agent=agent, read_rules=read, write_rules=write, may_erase=message.may_erase,
                visible_fields=frozenset(fields), description=description, erase_selectors=frozenset(selectors),
                max_source_kind=max_source_kind or SourceKind.INPUT)


def read_view(message: pb.View) -> tuple[View, list[FieldViolation]]:
    """``message`` read by the server's own rules, and every rule it breaks: for tools (the
    ``memoryd views`` command) that check a view before sending it or read one the server sent."""
    check = Checker(Limits(), message, path="view")
    view = view_from_message(check, "view", message)
    return view, check.violations


def validate_put_view(request: admin.PutViewRequest, limits: Limits) -> PutViewCommand:
    check = Checker(limits, request)
    if not request.HasField("view"):
        check.fail("view", "is required")
    view = view_from_message(check, "view", request.view)
    if request.expected_version < 0:
        check.fail("expected_version", "must not be negative")
    check.done()
    return PutViewCommand(view, request.expected_version)


def validate_agent(request: admin.GetViewRequest | admin.DeleteViewRequest, limits: Limits) -> AgentCommand:
    check = Checker(limits, request)
    agent = request.agent
    check.done()
    return AgentCommand(agent)


def validate_list_views(request: admin.ListViewsRequest, limits: Limits) -> ListViewsCommand:
    check = Checker(limits, request)
    size = check.page_size("page_size", request.page_size)
    token = request.page_token
    check.done()
    return ListViewsCommand(size, token)
