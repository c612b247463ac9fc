"""A small client for the RPCs, for the README tour and for trying things by hand.

Each command builds a request from flags (or takes a whole request as JSON with
``--request``), calls the server and prints the response as JSON. The token comes from
``--token``, ``$MEMORYD_TOKEN`` or ``--token-file`` (default: the embedded default's demo
agent token).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc

from ._errors import TOKEN_HINT, CliError, report_rpc_error

CATEGORY_NAMES = [c.removeprefix("CATEGORY_").lower() for c in pb.Category.keys()[1:]]


def add_client_commands(commands: Any) -> None:
    def client(name: str, help: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help)
        parser.add_argument("--addr", default=os.environ.get("MEMORYD_ADDR", "127.0.0.1:50051"))
        parser.add_argument("--token", default=os.environ.get("MEMORYD_TOKEN", ""))
        parser.add_argument("--token-file", default=".memoryd/tokens/demo-agent.token")
        parser.add_argument("--request", help="the whole request as JSON (overrides the flags)")
        parser.add_argument("--subject", default="")
        return parser

    write = client("write", "write one memory")
    write.add_argument("--category", choices=CATEGORY_NAMES, default="fact")
    write.add_argument("--key", default="")
    write.add_argument("--text", default="")
    write.add_argument("--importance", type=float)
    write.add_argument("--tag", action="append", default=[])
    write.add_argument("--idempotency-key", default="")
    write.add_argument("--print-id", action="store_true", help="print only the memory id")
    write.add_argument("--wait", action="store_true", help="return once the memory is searchable by meaning")
    write.set_defaults(run=_write)

    recall = client("recall", "recall memories by meaning and words (--query) and/or by key (repeat --key)")
    recall.add_argument("--key", action="append", default=[])
    recall.add_argument("--query", default="")
    recall.add_argument("--top-k", type=int, default=0)
    recall.add_argument("--block", action="store_true", help="also render the prompt block")
    recall.set_defaults(run=_recall)

    view = client("view", "list a subject's memories (MemoryView)")
    view.add_argument("--page-size", type=int, default=0)
    view.add_argument("--page-token", default="")
    view.set_defaults(run=_view)

    history = client("history", "list the versions of one memory")
    history.add_argument("--memory-id", default="")
    history.set_defaults(run=_history)

    erase = client("erase", "forget or purge memories of a subject")
    which = erase.add_mutually_exclusive_group()
    which.add_argument("--id", action="append", default=[])
    which.add_argument("--key", default="")
    which.add_argument("--category", choices=CATEGORY_NAMES)
    which.add_argument("--source-turn-id", default="")
    which.add_argument("--all", action="store_true", help="every memory of the subject")
    erase.add_argument("--mode", choices=["forget", "purge"], default="forget")
    erase.add_argument("--reason", default="")
    erase.set_defaults(run=_erase)


def _category(name: str) -> int:
    return pb.Category.Value(f"CATEGORY_{name.upper()}")


def _write(args: argparse.Namespace) -> int:
    request = svc.WriteRequest(subject=args.subject, idempotency_key=args.idempotency_key,
                               consistency=svc.CONSISTENCY_WAIT_INDEXED if args.wait else svc.CONSISTENCY_INDEX_ASYNC)
    item = request.items.add(category=_category(args.category), key=args.key, text=args.text, tags=args.tag)
    if args.importance is not None:
        item.importance = args.importance
    return _call(args, "Write", request, print_id=args.print_id)


def _recall(args: argparse.Namespace) -> int:
    request = svc.RecallRequest(subject=args.subject, keys=args.key, query=args.query, top_k=args.top_k,
                                render_block=args.block)
    return _call(args, "Recall", request)


def _view(args: argparse.Namespace) -> int:
    request = svc.MemoryViewRequest(subject=args.subject, page_size=args.page_size, page_token=args.page_token)
    return _call(args, "MemoryView", request)


def _history(args: argparse.Namespace) -> int:
    return _call(args, "GetHistory", svc.GetHistoryRequest(subject=args.subject, memory_id=args.memory_id))


def _erase(args: argparse.Namespace) -> int:
    mode = svc.ERASE_MODE_PURGE if args.mode == "purge" else svc.ERASE_MODE_FORGET
    request = svc.EraseRequest(subject=args.subject, mode=mode, reason=args.reason)
    if args.id:
        request.ids.ids.extend(args.id)
    elif args.key:
        request.key = args.key
    elif args.category:
        request.category = _category(args.category)  # type: ignore[assignment]
    elif args.source_turn_id:
        request.source_turn_id = args.source_turn_id
    elif args.all:
        request.all_of_subject = True
    return _call(args, "Erase", request)


def _token(args: argparse.Namespace) -> str:
    if args.token:
        return str(args.token)
    path = Path(args.token_file)
    if not path.exists():
        raise CliError(f"no token: --token and MEMORYD_TOKEN are empty and {path} does not exist", TOKEN_HINT)
    return path.read_text().strip()


def _call(args: argparse.Namespace, method: str, request: Any, *, print_id: bool = False) -> int:
    if args.request:
        request = json_format.Parse(args.request, type(request)())
    with grpc.insecure_channel(args.addr) as channel:
        stub = svc_grpc.MemoryServiceStub(channel)
        try:
            response = getattr(stub, method)(request, metadata=(("authorization", f"Bearer {_token(args)}"),),
                                             timeout=30)
        except grpc.RpcError as error:
            _print_error(error, args.addr)
            return 1
    if print_id:
        print(response.results[0].memory_id)
    else:
        print(json_format.MessageToJson(response, preserving_proto_field_name=True, indent=2, ensure_ascii=False))
    return 0


def _print_error(error: grpc.RpcError, addr: str = "") -> None:
    report_rpc_error(error, addr)
