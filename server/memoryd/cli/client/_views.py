"""``memoryd views``: declare the tenant's views in a YAML file and apply it.

::

    views:
      payment-agent:
        description: Pays invoices and refunds
        read:  {fact: [iban, "billing_*"], preference: [currency]}
        write: {fact: [iban, "billing_*"]}
        erase: false              # true (every selector) or a list: [ids, key, source_turn, ...]
        fields: [id, key, text, category, updated_at]

A category of ``"*"`` means every category, and a field list of ``"*"`` every field.
``apply`` stores each view that differs from the stored one and prints what changed;
applying the same file again changes nothing. ``--prune`` also deletes the views of agents
the file does not name. The tenant is the admin token's (``--token``, ``$MEMORYD_ADMIN_TOKEN``,
else the embedded default's ``.memoryd/tokens/admin.token``); the connection options (TLS,
mutual TLS) are the shared ones of ``_connect``. ``list`` prints YAML (the file's format),
or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import json_format

from memoryd.client import MemorydClient, MemorydError
from memoryd.domain import ERASE_SELECTORS, MEMORY_FIELDS, Category, SourceKind, View, ViewRule
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import view_admin_service_pb2 as admin

from .._connect import client_for, connection_options, token_options
from .._errors import report_failure


def add_view_commands(commands: Any) -> None:
    views = commands.add_parser("views", help="per-agent views (admin token)")
    sub = views.add_subparsers(dest="views_command", required=True, metavar="COMMAND")

    # Not $MEMORYD_TOKEN: that is usually an agent's token, and views need an admin's.
    parents = [connection_options(), token_options(admin=True)]

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".", parents=parents)

    apply = command("apply", "store the views declared in a YAML file; print what changed")
    apply.add_argument("file", type=Path, help="the YAML file declaring the views (see `memoryd views --help`)")
    apply.add_argument("--prune", action="store_true", help="delete the views of agents the file does not name")
    apply.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    apply.set_defaults(run=_apply)
    listing = command("list", "print every view of the tenant (every page) as YAML, the format apply reads")
    listing.add_argument("--json", action="store_true", help="print JSON instead: one View message per agent")
    listing.set_defaults(run=_list)
    delete = command("delete", "delete one agent's view (the agent is then denied everything)")
    delete.add_argument("agent", help="the agent whose view to delete")
    delete.set_defaults(run=_delete)


def load_views(path: Path) -> list[View]:
    """The views declared in ``path``; ValueError names the first problem."""
    from memoryd.server import read_view
    from memoryd.server import present

    document = yaml.safe_load(path.read_text())
    if not isinstance(document, dict) or not isinstance(document.get("views"), dict):
        raise ValueError(f"{path}: expected a mapping 'views: {{<agent>: <view>}}'")
    unknown_top = set(document) - {"views"}
    if unknown_top:
        raise ValueError(f"{path}: unknown top-level keys: {', '.join(sorted(map(str, unknown_top)))}")
    views = []
    for agent, body in document["views"].items():
        where = f"{path}: views.{agent}"
        body = body or {}
        if not isinstance(body, dict):
            raise ValueError(f"{where}: expected a mapping")
        # "version" is what `views list` prints; it is informational here.
        unknown = set(body) - {"description", "read", "write", "erase", "fields", "version", "trust"}
        if unknown:
            raise ValueError(f"{where}: unknown keys: {', '.join(sorted(map(str, unknown)))}")
        erase = body.get("erase", False)
        if isinstance(erase, bool):
            may_erase, selectors = erase, frozenset[str]()
        elif isinstance(erase, list) and all(s in ERASE_SELECTORS for s in erase):
            may_erase, selectors = bool(erase), frozenset(erase)
        else:
            raise ValueError(f"{where}.erase: true, false or a list of {', '.join(ERASE_SELECTORS)}")
        fields = body.get("fields", [])
        fields = sorted(MEMORY_FIELDS) if fields == "*" or fields == ["*"] else fields
        if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
            raise ValueError(f"{where}.fields: a list of Memory field names, or '*'")
        trust = body.get("trust", SourceKind.INPUT.value)
        if trust not in [k.value for k in SourceKind]:
            raise ValueError(f"{where}.trust: the most trusted source kind the agent may assert, one of "
                             f"{', '.join(k.value for k in SourceKind)}")
        view = View(str(agent), _rules(f"{where}.read", body.get("read")), _rules(f"{where}.write", body.get("write")),
                    may_erase, frozenset(fields), str(body.get("description", "")), 0, selectors, SourceKind(trust))
        _, violations = read_view(present.view(view))  # the server's own rules, before any call
        if violations:
            raise ValueError(f"{where}: " + "; ".join(f"{_file_field(v.field)}: {v.description}"
                                                      for v in violations))
        views.append(view)
    return views


def _file_field(path: str) -> str:
    """A field path of the View message, in the file's words (view.visible_fields[2] → fields)."""
    path = re.sub(r"\[\d+\]", "", path.removeprefix("view."))
    for message_name, file_name in (("visible_fields", "fields"), ("read_rules", "read"), ("write_rules", "write"),
                                    ("erase_selectors", "erase"), ("key_patterns", "patterns")):
        path = path.replace(message_name, file_name)
    return path


def _rules(where: str, section: Any) -> tuple[ViewRule, ...]:
    if section is None:
        return ()
    if not isinstance(section, dict):
        raise ValueError(f"{where}: a mapping of category to key patterns")
    rules = []
    for name, patterns in section.items():
        patterns = [patterns] if isinstance(patterns, str) else patterns
        if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) for p in patterns):
            raise ValueError(f"{where}.{name}: a key pattern or a list of them")
        try:
            categories = list(Category) if name == "*" else [Category(name)]
        except ValueError:
            raise ValueError(f"{where}: unknown category {name!r} "
                             f"(one of {', '.join(c.value for c in Category)} or '*')") from None
        rules += [ViewRule(c, tuple(patterns)) for c in categories]
    return tuple(rules)


def diff(before: View | None, after: View | None) -> list[str]:
    """What changes between two views, one line per changed part."""
    old = before.definition() if before else {}
    new = after.definition() if after else {}
    return [f"{key}: {json.dumps(old.get(key))} -> {json.dumps(new.get(key))}"
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]


def _from_message(message: pb.View) -> View:
    from memoryd.server import read_view

    view, _ = read_view(message)
    return View.from_definition(view.agent, view.definition(), message.version)


def _current(client: MemorydClient) -> dict[str, View]:
    """Every view of the tenant, by agent, page after page."""
    return {v.agent: _from_message(v) for v in client.iter_views(page_size=500)}


def _apply(args: argparse.Namespace) -> int:
    from memoryd.server import present

    desired = load_views(args.file)
    with client_for(args, admin=True) as client:
        try:
            current = _current(client)
            changes = 0
            for view in desired:
                before = current.get(view.agent)
                lines = diff(before, view)
                if not lines:
                    print(f"= {view.agent} (version {before.version if before else 0}, unchanged)")
                    continue
                changes += 1
                version = "?"
                if not args.dry_run:
                    stored = client.put_view(admin.PutViewRequest(
                        view=present.view(view), expected_version=before.version if before else 0)).view
                    version = str(stored.version)
                print(f"{'~' if before else '+'} {view.agent} (version {version})")
                for line in lines:
                    print(f"    {line}")
            named = {v.agent for v in desired}
            for agent in sorted(set(current) - named):
                if not args.prune:
                    print(f"  {agent} (not in the file; kept, --prune deletes it)")
                    continue
                changes += 1
                if not args.dry_run:
                    client.delete_view(admin.DeleteViewRequest(agent=agent))
                print(f"- {agent} (deleted)")
        except MemorydError as failure:
            report_failure(failure, args.addr)
            return 1
    summary = "would change" if args.dry_run else "changed"
    print(f"{changes} view(s) {summary}", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    with client_for(args, admin=True) as client:
        try:
            if args.json:
                listing = admin.ListViewsResponse(views=list(client.iter_views(page_size=500)))
                print(json_format.MessageToJson(listing, preserving_proto_field_name=True, indent=2,
                                                ensure_ascii=False))
                return 0
            current = _current(client)
        except MemorydError as failure:
            report_failure(failure, args.addr)
            return 1
    document = {"views": {agent: _as_yaml(view) for agent, view in sorted(current.items())}}
    print(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), end="")
    return 0


def _as_yaml(view: View) -> dict[str, Any]:
    definition = view.definition()
    body: dict[str, Any] = {"version": view.version}
    if view.description:
        body["description"] = view.description
    for name, key in (("read", "read_rules"), ("write", "write_rules")):
        rules = definition[key]
        if rules:
            body[name] = {r["category"]: r["key_patterns"] for r in rules}  # type: ignore[index, union-attr]
    body["erase"] = definition["erase_selectors"] or view.may_erase
    body["fields"] = definition["visible_fields"]
    if view.max_source_kind is not SourceKind.INPUT:
        body["trust"] = view.max_source_kind.value
    return body


def _delete(args: argparse.Namespace) -> int:
    with client_for(args, admin=True) as client:
        try:
            deleted = client.delete_view(admin.DeleteViewRequest(agent=args.agent)).deleted
        except MemorydError as failure:
            report_failure(failure, args.addr)
            return 1
    print(f"deleted the view of {args.agent}" if deleted else f"{args.agent} had no view")
    return 0
