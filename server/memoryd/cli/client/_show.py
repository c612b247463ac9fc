"""How the client commands print an answer: a table for a person at a terminal, JSON for scripts.

JSON (``--json``, or whenever standard output is not a terminal) is the response message as
``json_format`` writes it — byte for byte what these commands printed before they had tables,
so scripts and pipes keep working. The table form (on a terminal, or forced with ``--table``,
e.g. for ``| less``) shows each memory on one line through the one renderer (``_table``), ids
whole; ``view`` shows the agent's effective view only with ``--show-view``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import Any

import yaml
from google.protobuf import json_format
from google.protobuf.message import Message

from memoryd.client import enum_name
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from .._table import Column, render

MEMORY_COLUMNS = (Column("id"), Column("category"), Column("key", cut=True), Column("text", cut=True))


def output_options() -> argparse.ArgumentParser:
    """The parent parser of ``--json`` and ``--table``: which form to print."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("output").add_mutually_exclusive_group()
    group.add_argument("--json", dest="output", action="store_const", const="json",
                       help="print the response as JSON (the default when standard output is not a terminal)")
    group.add_argument("--table", dest="output", action="store_const", const="table",
                       help="print a table (the default on a terminal), even into a pipe")
    return parent


def as_json(message: Message) -> str:
    return json_format.MessageToJson(message, preserving_proto_field_name=True, indent=2, ensure_ascii=False)


def show(args: argparse.Namespace, response: Message) -> None:
    """Print ``response`` as the options and standard output ask."""
    output = getattr(args, "output", None) or ("table" if sys.stdout.isatty() else "json")
    if output == "json":
        print(as_json(response))
        return
    print(_TABLES[type(response).__name__](response, args))


def _time(message: Message, field: str) -> str:
    if not message.HasField(field):
        return ""
    return str(getattr(message, field).ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S"))


def _memory_row(memory: pb.Memory) -> list[str]:
    return [memory.id, enum_name(memory, "category"), memory.key, memory.text]


def _memories(memories: Sequence[pb.Memory], *, extra: Sequence[Column] = (),
              extras: Iterable[Sequence[str]] = ()) -> str:
    if not memories:
        return "(no memories)"
    rows = [[*more, *_memory_row(m)] for m, more in zip(memories, extras or ([] for _ in memories), strict=False)]
    return render([*extra, *MEMORY_COLUMNS], rows)


def _more(response: Message, what: str) -> list[str]:
    token = getattr(response, "next_page_token", "")
    return [f"more {what}: add --page-token {token} (or --all for every page)"] if token else []


def _write(response: svc.WriteResponse, args: argparse.Namespace) -> str:
    rows = [[r.memory_id, enum_name(r, "outcome"), str(r.version) if r.version else "", r.reason]
            for r in response.results]
    lines = [render([Column("id"), Column("outcome"), Column("version"), Column("reason", cut=True)], rows)]
    if response.indexed:
        lines.append("searchable by meaning now")
    if response.extraction_job_id:
        lines.append(f"extraction job: {response.extraction_job_id}")
    lines += [f"dropped {d.count}: {d.reason}" for d in response.dropped]
    return "\n".join(lines)


def _recall(response: svc.RecallResponse, args: argparse.Namespace) -> str:
    scores = [[f"{m.score:.2f}"] for m in response.memories]
    lines = [_memories([m.memory for m in response.memories], extra=[Column("score")], extras=scores)]
    if response.degraded:
        lines.append(f"degraded: {response.degraded_reason}")
    if response.block:
        lines += ["", response.block]
    return "\n".join(lines)


def _view(response: svc.MemoryViewResponse, args: argparse.Namespace) -> str:
    lines = [_memories(response.memories), *_more(response, "memories")]
    if getattr(args, "show_view", False) and response.HasField("view"):
        view = json_format.MessageToDict(response.view, preserving_proto_field_name=True)
        lines += ["", yaml.safe_dump({"view": view}, sort_keys=False, allow_unicode=True, default_flow_style=None,
                                     width=100).rstrip()]
    return "\n".join(lines)


def _history(response: svc.GetHistoryResponse, args: argparse.Namespace) -> str:
    if not response.versions:
        return "(no versions)"
    rows = [[str(v.memory.version), enum_name(v, "change"), _time(v, "recorded_at"), v.memory.key, v.memory.text]
            for v in response.versions]
    columns = [Column("version"), Column("change"), Column("recorded (UTC)"), Column("key", cut=True),
               Column("text", cut=True)]
    return "\n".join([f"memory {response.versions[0].memory.id}", render(columns, rows), *_more(response, "versions")])


def _erase(response: svc.EraseResponse, args: argparse.Namespace) -> str:
    receipt = response.receipt
    counts = json_format.MessageToDict(receipt.counts, preserving_proto_field_name=True,
                                       always_print_fields_with_no_presence=True)
    lines = [f"erase id: {receipt.erase_id}", f"mode: {enum_name(receipt, 'mode')}",
             # "memories 1", not "1 memories": the receipt's own names, which count anything.
             "removed: " + ", ".join(f"{what} {n}" for what, n in counts.items()),
             f"verified: {'yes' if receipt.verified else 'no'}"]
    if receipt.pending:
        lines.append("pending: " + ", ".join(receipt.pending))
    if receipt.unchecked:
        lines.append("unchecked: " + ", ".join(receipt.unchecked))
    return "\n".join(lines)


def _snapshot(response: svc.EndSessionResponse | svc.ResumeSessionResponse, args: argparse.Namespace) -> str:
    snapshot = response.snapshot
    lines = [f"session: {snapshot.session_id}"]
    if snapshot.HasField("summary"):
        lines.append(f"summary: {snapshot.summary.text}")
    memories = [*snapshot.explicit, *snapshot.inferred]
    kinds = [["explicit"]] * len(snapshot.explicit) + [["inferred"]] * len(snapshot.inferred)
    lines.append(_memories(memories, extra=[Column("kind")], extras=kinds))
    return "\n".join(lines)


_TABLES: dict[str, Any] = {
    "WriteResponse": _write, "RecallResponse": _recall, "MemoryViewResponse": _view,
    "GetHistoryResponse": _history, "EraseResponse": _erase, "EndSessionResponse": _snapshot,
    "ResumeSessionResponse": _snapshot,
}
