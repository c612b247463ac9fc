"""Physical removal of deleted vectors from Milvus Lite's files.

Milvus Lite 3.2.2 (pure Python, in this process) keeps a deleted row where it was: a delete
writes a tombstone (a ``delta_*.parquet`` file holding the primary key) and the row stays in
its ``data_*.parquet`` segment — id, subject, key, tags and the full embedding — and in the
segment's index sidecar. Its own compaction only runs after a flush, and only when a partition
has four files of one size class or more than 32 files; the tombstone files go only once no
data file older than them is left anywhere. ``MilvusClient.compact()`` reaches its
``ManualCompaction`` RPC, which does nothing and answers success, and ``get_compaction_state``
always answers "Completed". So a purge that trusted them would leave everything on disk.

``scrub`` does what Lite's background compaction does, for every segment that still holds a
deleted row, under the same maintenance lock, through the engine's own compaction step (read
the segment, drop rows a tombstone hides, write a new segment, commit the manifest, remove the
old files), and then drops the tombstones, which no data file needs any more. ``residue``
reads every file under the collection's folder back and says which of the given ids it still
holds. Both reach into Lite's engine (``Collection`` private fields): pinned to
milvus-lite 3.2.2 in pyproject, and a changed engine makes them report that nothing could be
checked rather than fail the erase.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from typing import Any

_log = logging.getLogger("memoryd.storage.milvus")


def lite_collection(uri: str, name: str) -> Any | None:
    """The in-process Milvus Lite collection behind ``uri`` (a ``.db`` path), or None when
    the index is not a Milvus Lite of this process (a server, a ``milvus-lite server``)."""
    if not uri.endswith(".db"):
        return None
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:
        return None
    entry = getattr(server_manager_instance, "_servers", {}).get(os.path.abspath(uri))
    if entry is None:
        return None
    db = entry[1]
    return db.get_collection(name) if db.has_collection(name) else None


def scrub(collection: Any) -> int:
    """Rewrite every segment that still holds a deleted row and drop the tombstones; return
    how many segment files were rewritten. The caller has flushed the deletes."""
    import pyarrow.parquet as pq

    pk = collection.pk_field
    root = collection.data_dir
    with collection._maintenance_lock:  # what Lite's own background compaction holds
        deleted = collection._delta_index.snapshot  # pk → highest delete seq
        manifest = collection._manifest
        rewritten = 0
        if deleted:
            # Only partitions with tombstone files can hold a hidden row: a delete names the
            # partition its rows live in (or, without one, is copied to every partition), and
            # a memory id lives in one tenant's partition only. Reading every partition's keys
            # instead costs about a millisecond per segment file on every purge.
            for partition in [p for p in manifest.list_partitions() if manifest.get_delta_files(p)]:
                partition_dir = os.path.join(root, "partitions", partition)
                hit = []
                for rel in manifest.get_data_files(partition):
                    table = pq.read_table(os.path.join(partition_dir, rel), columns=[pk, "_seq"])
                    keys, seqs = table.column(pk).to_pylist(), table.column("_seq").to_pylist()
                    if any(deleted.get(k, -1) > s for k, s in zip(keys, seqs)):
                        hit.append(rel)
                if hit:
                    # The engine's own step: dedup by key, drop what a tombstone hides, write a
                    # new segment, commit the manifest, remove the old files.
                    collection._compaction_mgr._compact_files(partition, partition_dir, hit, manifest,
                                                             collection._delta_index)
                    rewritten += len(hit)
            collection._refresh_segment_cache()
        # No data file holds a row older than its tombstone now, so no tombstone is needed:
        # drop them from memory (gc_below everything) and from disk.
        collection._delta_index.gc_below(sys.maxsize)
        stale = {p: manifest.get_delta_files(p) for p in manifest.list_partitions()}
        stale = {p: files for p, files in stale.items() if files}
        if stale:
            for partition, files in stale.items():
                manifest.remove_delta_files(partition, files)
            manifest.save()  # before removing the files, as Lite does: a crash leaves orphans
            for partition, files in stale.items():
                for rel in files:
                    _remove(os.path.join(root, "partitions", partition, rel))
        collection._cleanup_orphan_index_files()  # the rewritten segments' index sidecars
    # Index the new segments in Lite's background worker (searches work meanwhile).
    collection._schedule_bg_maintenance()
    return rewritten


def residue(collection: Any, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` any file under the collection's folder may still hold: the key column
    of every Parquet (segments, tombstones) and Arrow (write-ahead log) file, every id for an
    index sidecar left without its segment, and the raw bytes of every other file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = set(ids)
    if not wanted:
        return set()
    pk = collection.pk_field
    found: set[str] = set()
    needles = {i: i.encode() for i in wanted}
    for folder, _dirs, names in os.walk(collection.data_dir):
        for name in names:
            path = os.path.join(folder, name)
            try:
                if name.endswith(".parquet"):
                    schema = pq.read_schema(path)
                    if pk in schema.names:
                        found |= wanted & set(pq.read_table(path, columns=[pk]).column(pk).to_pylist())
                        continue
                elif name.endswith(".arrow"):
                    with pa.memory_map(path) as source:
                        table = pa.ipc.open_stream(source).read_all()
                    if pk in table.column_names:
                        found |= wanted & set(table.column(pk).to_pylist())
                        continue
                if name.endswith((".idx", ".sidx")):
                    # An index sidecar can be large (the segment's vectors): it is bound to its
                    # segment by name, so one whose segment is gone may hold anything.
                    segment = os.path.join(os.path.dirname(folder), "data", name.split(".")[0] + ".parquet")
                    if not os.path.exists(segment):
                        found |= wanted
                    continue
                with open(path, "rb") as fh:
                    data = fh.read()
            except (OSError, pa.ArrowException):
                continue  # removed meanwhile, or being written: a later check sees it
            found |= {i for i, b in needles.items() if b in data}
    return found


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        _log.warning("could not remove a Milvus Lite tombstone file: %s", exc)
