"""A small client for the RPCs, for the README tour and for trying things by hand.

Each command builds a request from flags (or takes a whole request as JSON with
``--request``), calls the server and prints the response: a table on a terminal, JSON with
``--json`` or into a pipe (``_show``). The connection (address,
TLS, mutual TLS) and the token options are the shared ones of ``_connect``; the token comes
from ``--token``, ``$MEMORYD_TOKEN`` or ``--token-file`` (default: the embedded default's demo
agent token). ``view`` and ``history`` print one page, or with ``--all`` every page as one
response. ``end-session`` and ``resume-session`` print the session's snapshot.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from google.protobuf import json_format

from memoryd.domain import Category, EraseMode
from memoryd.client import MemorydError
from memoryd.v1 import memory_service_pb2 as svc

from .._connect import client_for, connection_options, token_options
from .._errors import report_failure
from ._show import output_options, show

CATEGORY_NAMES = [c.value for c in Category]


def add_client_commands(commands: Any) -> None:
    parents = [connection_options(), token_options(admin=False), output_options()]

    def client(name: str, help: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".",
                                     parents=parents)
        parser.add_argument("--request", metavar="JSON", help="the whole request as JSON (overrides the flags)")
        parser.add_argument("--subject", default="", help="the subject (person) the memories are about")
        return parser

    def pages(parser: argparse.ArgumentParser, what: str) -> None:
        parser.add_argument("--page-size", type=int, default=0, help=f"{what} per page, 1-500 (default: 50)")
        parser.add_argument("--page-token", default="", help="continue a listing from this next_page_token")
        parser.add_argument("--all", action="store_true", help="walk every page and print them as one response")

    write = client("write", "write one memory")
    write.add_argument("--category", choices=CATEGORY_NAMES, default="fact", help="the memory's category "
                                                                                   "(default: fact)")
    write.add_argument("--key", default="", help="the memory's key, for structured memories (e.g. home_city)")
    write.add_argument("--text", default="", help="the memory's text")
    write.add_argument("--importance", type=float, help="importance from 0 to 1")
    write.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
    write.add_argument("--idempotency-key", default="", help="a retry with the same key returns the first answer")
    write.add_argument("--print-id", action="store_true", help="print only the memory id")
    write.add_argument("--wait", action="store_true", help="return once the memory is searchable by meaning")
    write.add_argument("--session-id", default="", help="the conversation session the memory joins (its snapshot "
                                                        "is stored when the session ends)")
    write.set_defaults(run=_write)

    recall = client("recall", "recall memories by meaning and words (--query) and/or by key (repeat --key)")
    recall.add_argument("--key", action="append", default=[], help="a key to look up (repeatable)")
    recall.add_argument("--query", default="", help="free text to search by meaning and words")
    recall.add_argument("--top-k", type=int, default=0, help="at most this many memories (default: the server's)")
    recall.add_argument("--min-relevance", type=float, metavar="R",
                        help="leave out memories less relevant than R, 0 to 1 (default: the server's; 0: none)")
    recall.add_argument("--no-neighbours", action="store_true",
                        help="rank each memory on its own: no turns lifted as the best matching turn's neighbours")
    recall.add_argument("--block", action="store_true", help="also render the prompt block")
    recall.set_defaults(run=_recall)

    view = client("view", "list a subject's memories (MemoryView)")
    pages(view, "memories")
    view.add_argument("--show-view", action="store_true",
                      help="in the table, also show the agent's effective view (the JSON always holds it)")
    view.set_defaults(run=_view)

    history = client("history", "list the versions of one memory")
    history.add_argument("--memory-id", default="", help="the memory whose versions to list")
    pages(history, "versions")
    history.set_defaults(run=_history)

    erase = client("erase", "forget or purge memories of a subject, or of the organisation (--org)")
    which = erase.add_mutually_exclusive_group()
    which.add_argument("--id", action="append", default=[], help="a memory id (repeatable)")
    which.add_argument("--key", default="", help="every memory with this key")
    which.add_argument("--category", choices=CATEGORY_NAMES, help="every memory of this category")
    which.add_argument("--source-turn-id", default="", help="every memory taken from this dialogue turn")
    which.add_argument("--all", action="store_true", help="every memory of the subject (with --org: of the "
                                                          "organisation)")
    erase.add_argument("--org", action="store_true",
                       help="the organisation's memories (scope SCOPE_ORG) instead of a subject's: no --subject")
    erase.add_argument("--mode", choices=[m.value for m in EraseMode], default="forget",
                       help="forget (kept for audit, no longer served) or purge (deleted from every store); "
                            "default: forget")
    erase.add_argument("--reason", default="", help="recorded in the erasure receipt and the audit log")
    erase.set_defaults(run=_erase)

    end = client("end-session", "end a session and store its snapshot: its memories and a short summary")
    end.add_argument("--session-id", default="", help="the session to end")
    end.set_defaults(run=_end_session)

    resume = client("resume-session", "print the latest session snapshot of a subject, to continue where it stopped")
    resume.add_argument("--session-id", default="", help="that session's snapshot instead of the latest")
    resume.set_defaults(run=_resume_session)


def _category(name: str) -> int:
    from memoryd.server import CATEGORY

    return CATEGORY.to_proto[Category(name)]


def _write(args: argparse.Namespace) -> int:
    request = svc.WriteRequest(subject=args.subject, idempotency_key=args.idempotency_key,
                               consistency=svc.CONSISTENCY_WAIT_INDEXED if args.wait else svc.CONSISTENCY_INDEX_ASYNC,
                               session_id=args.session_id)
    item = request.items.add(category=_category(args.category), key=args.key, text=args.text, tags=args.tag)
    if args.importance is not None:
        item.importance = args.importance
    return _call(args, "Write", request, print_id=args.print_id)


def _recall(args: argparse.Namespace) -> int:
    request = svc.RecallRequest(subject=args.subject, keys=args.key, query=args.query, top_k=args.top_k,
                                render_block=args.block, exclude_neighbours=args.no_neighbours)
    if args.min_relevance is not None:
        request.min_relevance = args.min_relevance
    return _call(args, "Recall", request)


def _view(args: argparse.Namespace) -> int:
    request = svc.MemoryViewRequest(subject=args.subject, page_size=args.page_size, page_token=args.page_token)
    return _call(args, "MemoryView", request, items="memories")


def _history(args: argparse.Namespace) -> int:
    request = svc.GetHistoryRequest(subject=args.subject, memory_id=args.memory_id, page_size=args.page_size,
                                    page_token=args.page_token)
    return _call(args, "GetHistory", request, items="versions")


def _erase(args: argparse.Namespace) -> int:
    from memoryd.server import ERASE_MODE

    from memoryd.v1 import memory_pb2 as pb

    mode = ERASE_MODE.to_proto[EraseMode(args.mode)]
    request = svc.EraseRequest(subject=args.subject, mode=mode, reason=args.reason,
                               scope=pb.SCOPE_ORG if args.org else pb.SCOPE_UNSPECIFIED)
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


def _end_session(args: argparse.Namespace) -> int:
    return _call(args, "EndSession", svc.EndSessionRequest(subject=args.subject, session_id=args.session_id))


def _resume_session(args: argparse.Namespace) -> int:
    return _call(args, "ResumeSession", svc.ResumeSessionRequest(subject=args.subject, session_id=args.session_id))


def _call(args: argparse.Namespace, method: str, request: Any, *, print_id: bool = False, items: str = "") -> int:
    if args.request:
        request = json_format.Parse(args.request, type(request)())
    with client_for(args) as client:
        call = getattr(client, _snake(method))  # Write -> client.write
        try:
            response = call(request)
            # --all: every page, gathered into the first page's response.
            while items and getattr(args, "all", False) and response.next_page_token:
                request.page_token = response.next_page_token
                page = call(request)
                getattr(response, items).extend(getattr(page, items))
                response.next_page_token = page.next_page_token
        except MemorydError as failure:
            report_failure(failure, args.addr)
            return 1
    if print_id:
        print(response.results[0].memory_id)
    else:
        show(args, response)
    return 0


def _snake(method: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", method).lower()
