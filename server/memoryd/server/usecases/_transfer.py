"""ExportMemories and ImportMemories: their validation, and the archive work their use cases run.

Export reads what the caller's view reads and keeps what it shows, so an archive never holds
more than the agent could have listed. It needs a view that shows at least category, text
and (unless it reads only keyless categories) key: without them nothing could be restored
(the guard's ``check_exportable`` decides).
Import writes through the Write use case — the view's write rules, the
conflict policies, one transaction — so it can do nothing a Write could not.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memoryd.domain import DataKeyUnavailable, Draft, Listing, Memory, Page, ResourceExhausted, Slices, View, sliced
from memoryd.v1 import memory_service_pb2 as svc

from . import _archive as archive
from .._config import Limits
from ..guard import check_exportable
from ..validation import Checker

# What an import request carries besides its archive (subject, passphrase, framing): an
# exported archive leaves room for it, so every archive that can be exported can be imported.
REQUEST_HEADROOM_BYTES = 4096
EXPORT_PAGE_SIZE = 500


def max_archive_bytes(limits: Limits) -> int:
    return limits.max_message_bytes - REQUEST_HEADROOM_BYTES


@dataclass(frozen=True)
class ExportCommand:
    subject: str
    passphrase: str
    max_bytes: int


@dataclass(frozen=True)
class ImportCommand:
    subject: str
    archive: bytes
    passphrase: str
    limits: Limits


def validate_export(request: svc.ExportMemoriesRequest, limits: Limits) -> ExportCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    passphrase = request.passphrase  # its length is an annotated rule
    check.done()
    return ExportCommand(subject, passphrase, max_archive_bytes(limits))


def validate_import(request: svc.ImportMemoriesRequest, limits: Limits) -> ImportCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    passphrase = request.passphrase
    if len(request.archive) > max_archive_bytes(limits):
        check.fail("archive", f"must be at most {max_archive_bytes(limits)} bytes")
    check.done()
    return ImportCommand(subject, request.archive, passphrase, limits)


Pages = Callable[[Page], Awaitable[Listing]]


async def export_archive(view: View, cmd: ExportCommand, pages: Pages) -> tuple[bytes, list[str]]:
    """The archive of every memory ``pages`` yields (the caller's narrowed listing), and their ids."""
    check_exportable(view)
    memories: list[Memory] = []
    size = 0
    page = Page(size=EXPORT_PAGE_SIZE)
    slices = Slices()  # measuring 4 MiB of memories' data as JSON takes ~35 ms
    while True:
        listing = await pages(page)
        for m in listing.memories:
            await slices.give_way()
            if m.content_unavailable:
                raise DataKeyUnavailable("some of this subject's memories cannot be decrypted (its data key is "
                                         "unavailable), so no faithful archive can be made")
            size += len(m.text.encode()) + (len(archive.encode(m.data)) if m.data else 0)
            if size > cmd.max_bytes:
                raise _too_big(cmd.max_bytes)
            if len(memories) >= archive.MAX_MEMORIES:
                raise ResourceExhausted(f"an archive holds at most {archive.MAX_MEMORIES} memories; export with "
                                        "a view that reads fewer categories")
            memories.append(m)
        if not listing.has_more or not listing.memories:
            break
        last = listing.memories[-1]
        page = Page(last.updated_at, last.id, EXPORT_PAGE_SIZE)
    # Oldest first, so an import re-creates them in the order they were first written — unless
    # the view hides created_at, whose order the archive's order must not tell. Equals are in
    # the order of what the archive holds of them (then their ids): nothing hidden orders them.
    shows_created = "created_at" in view.visible_fields
    entries = await sliced(memories, lambda m: archive.memory_entry(m, view.visible_fields))

    def ordered() -> tuple[list[dict[str, Any]], list[str]]:
        pairs = sorted(zip(memories, entries, strict=True), key=lambda pair: (
            pair[0].created_at if shows_created else datetime.min.replace(tzinfo=UTC),
            json.dumps(pair[1], sort_keys=True, default=str), pair[0].id))
        return [entry for _, entry in pairs], [m.id for m, _ in pairs]

    # Ordering by content, encoding 4 MiB of JSON, and scrypt: off the event loop.
    entries, ids = await asyncio.to_thread(ordered)
    data = await asyncio.to_thread(archive.plain_archive, cmd.subject, entries, datetime.now(UTC))
    if cmd.passphrase:
        data = await asyncio.to_thread(archive.seal, data, cmd.passphrase)
    if len(data) > cmd.max_bytes:
        raise _too_big(cmd.max_bytes)
    return data, ids


def _too_big(max_bytes: int) -> ResourceExhausted:
    return ResourceExhausted(f"the archive would exceed {max_bytes} bytes, the most one message can carry "
                             "(limits.max_message_bytes less room for the request); export with a view that reads "
                             "fewer categories, or raise the limit on every server")


async def import_drafts(cmd: ImportCommand) -> list[Draft]:
    """The archive's memories as validated drafts; ArchiveInvalid names what is wrong."""
    def parse() -> list[Draft]:
        return archive.drafts(archive.open_archive(cmd.archive, cmd.passphrase), cmd.limits)

    return await asyncio.to_thread(parse)  # scrypt and a 4 MiB parse: off the event loop
