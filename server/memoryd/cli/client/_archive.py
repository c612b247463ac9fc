"""``memoryd export`` and ``memoryd import``: a subject's memories to and from an archive file.

The passphrase that seals an archive is read from a file (``--passphrase-file``) or an
environment variable (``--passphrase-env``), never from an argument, which any user could
read in the process list. The connection and the token are handled as by the other client
commands (``_connect``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from memoryd.client import MemorydError, enum_name
from memoryd.v1 import memory_service_pb2 as svc

from .._connect import client_for, connection_options, token_options
from .._errors import report_failure

# The client accepts what a server configured with a larger message limit may send.
_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024)]


def add_archive_commands(commands: Any) -> None:
    parents = [connection_options(), token_options(admin=False)]

    def command(name: str, help: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".", parents=parents)
        parser.add_argument("--subject", required=True, help="the subject whose memories to export or import")
        secret = parser.add_mutually_exclusive_group()
        secret.add_argument("--passphrase-file", type=Path, help="a file holding the passphrase (its last newline "
                                                                 "is ignored)")
        secret.add_argument("--passphrase-env", metavar="VAR", help="an environment variable holding the passphrase")
        return parser

    export = command("export", "write a subject's memories (as this agent's view shows them) to an archive")
    export.add_argument("--out", type=Path, help="the archive file (default: standard output)")
    export.set_defaults(run=_export)
    restore = command("import", "write the memories of an archive to a subject")
    restore.add_argument("file", help="the archive file ('-' for standard input)")
    restore.set_defaults(run=_import)


def _passphrase(args: argparse.Namespace) -> str:
    if args.passphrase_file is not None:
        return str(args.passphrase_file.read_text().removesuffix("\n").removesuffix("\r"))
    if args.passphrase_env:
        if args.passphrase_env not in os.environ:
            raise ValueError(f"the environment variable {args.passphrase_env} is not set")
        return os.environ[args.passphrase_env]
    return ""


def _export(args: argparse.Namespace) -> int:
    request = svc.ExportMemoriesRequest(subject=args.subject, passphrase=_passphrase(args))
    try:
        with client_for(args, options=_OPTIONS, timeout=120) as client:
            response = client.export_memories(request)
    except MemorydError as failure:
        report_failure(failure, args.addr)
        return 1
    kind = "sealed" if request.passphrase else "plain"
    if args.out is None:
        sys.stdout.buffer.write(response.archive)
        sys.stdout.buffer.flush()
        # Standard output holds the archive; the summary goes to standard error.
        print(f"exported {response.memories} memories of {args.subject} ({kind})", file=sys.stderr)
    else:
        args.out.write_bytes(response.archive)
        print(f"exported {response.memories} memories of {args.subject} to {args.out} ({kind})")
    return 0


def _import(args: argparse.Namespace) -> int:
    archive = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    request = svc.ImportMemoriesRequest(subject=args.subject, archive=archive, passphrase=_passphrase(args))
    try:
        with client_for(args, options=_OPTIONS, timeout=120) as client:
            response = client.import_memories(request)
    except MemorydError as failure:
        report_failure(failure, args.addr)
        return 1
    outcomes = Counter(enum_name(r, "outcome") for r in response.results)
    summary = ", ".join(f"{n} {name}" for name, n in sorted(outcomes.items()))
    print(f"imported {len(response.results)} memories into {args.subject}" + (f": {summary}" if summary else ""))
    return 0
