"""``memoryd consolidate``: merge a subject's episodic fragments about one topic into profile
memories (see ``memoryd.server.ingest._consolidation``). Operator-run only; nothing runs it
automatically."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from memoryd.domain import DEFAULT_SIMILARITY, Embedder, MemorydError

from .._context import Storage, open_storage

if TYPE_CHECKING:
    from memoryd.server import ConsolidationReport, Embedders


def add_consolidate_command(commands: Any) -> None:
    cmd = commands.add_parser("consolidate", help="merge a subject's episodic fragments about one topic into "
                                                  "profile memories (needs the extraction model)")
    cmd.add_argument("--tenant", required=True, help="the tenant of the subject")
    cmd.add_argument("--subject", required=True, help="the subject whose fragments to consolidate")
    cmd.add_argument("--dry-run", action="store_true",
                     help="print the groups and what would be written; change nothing")
    cmd.add_argument("--similarity", type=_similarity, default=DEFAULT_SIMILARITY,
                     help=f"cosine every member of a group has with every other (default {DEFAULT_SIMILARITY})")
    cmd.set_defaults(run=_consolidate)


def _similarity(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError("must be in (0, 1]")
    return value


async def _active_embedder(s: Storage, embedders: Embedders) -> Embedder | None:
    """The embedder of the active index (what the extraction worker's dedup uses), else the
    configured one if no index is active yet."""
    async with s.queue.catalog_tx() as conn:
        cur = await conn.execute("SELECT model_id FROM index_models WHERE active")
        row = await cur.fetchone()
    return embedders.get(row["model_id"]) if row is not None else embedders.configured


async def _consolidate(args: argparse.Namespace) -> int:
    from memoryd.server import Embedders, configured_embedder, consolidator, load
    from memoryd.storage import Consolidations

    if not load(args.config).extraction_configured:
        print("memoryd: error: consolidation needs the extraction model: set MEMORYD_EXTRACTION_URL and "
              "MEMORYD_EXTRACTION_MODEL", file=sys.stderr)
        return 2
    async with open_storage(args) as s:
        embedders = Embedders(configured_embedder(s.config))
        try:
            embedder = await _active_embedder(s, embedders)
            if embedder is None:
                print("memoryd: error: the active index's embedding model is not available here", file=sys.stderr)
                return 2
            await embedder.warm_up()
            worker = consolidator(s.config, Consolidations(s.store), embedder, threshold=args.similarity)
            try:
                report = await worker.run(args.tenant, args.subject, dry_run=args.dry_run)
            finally:
                worker.close()
        except MemorydError as exc:
            print(f"memoryd: error: {exc.message}", file=sys.stderr)
            return 1
        finally:
            embedders.close()
    _print(report, args.dry_run)
    return 1 if report.count("parse_failure") or report.count("unavailable") else 0


def _print(report: ConsolidationReport, dry_run: bool) -> None:
    for n, group in enumerate(report.groups, 1):
        print(f"group {n}: {len(group.fragments)} fragments")
        for fragment in group.fragments:
            print(f"  - {fragment.id} [{fragment.category.value}] {' '.join(fragment.text.split())}")
        draft = group.draft
        what = f"{draft.category.value} {draft.key}: {draft.text}" if draft is not None else ""
        if group.status == "would_write":
            print(f"  would write {what}; would forget {len(group.fragments)} fragments")
        elif group.status == "written" and group.result is not None:
            print(f"  wrote {group.result.memory_id} ({group.result.outcome.value}) {what}; "
                  f"forgot {len(group.fragments)} fragments")
        elif group.status == "pending" and group.result is not None:
            print(f"  kept pending on {group.result.memory_id}: {what}; fragments kept ({group.result.reason})")
        else:
            print(f"  {group.status.replace('_', ' ')}: {group.detail}; nothing written")
    verb = "would consolidate" if dry_run else "consolidated"
    done = "would_write" if dry_run else "written"
    skipped = report.count("skipped") + report.count("dropped") + report.count("changed")
    print(f"{report.fragments} episodic fragment(s), {len(report.groups)} group(s) of at least 3: {verb} "
          f"{report.count(done)}, skipped {skipped}, "
          f"parse failures {report.count('parse_failure')}, model unavailable {report.count('unavailable')}"
          f"{' (dry run: nothing changed)' if dry_run else ''}")
