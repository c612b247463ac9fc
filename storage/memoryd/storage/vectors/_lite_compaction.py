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

import array
import bisect
import logging
import os
import sys
import zlib
from collections.abc import Iterable
from typing import Any

_log = logging.getLogger("memoryd.storage.milvus")

_SIDECARS = (".idx", ".sidx")  # a segment's vector and scalar index files, named after it

# How long a purge's check waits for Lite's background index build before it reports what the
# files hold (see ``settle_sidecars``).
SIDECAR_WAIT_SECONDS = 10.0


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


def settle_sidecars(collection: Any, timeout: float = SIDECAR_WAIT_SECONDS) -> bool:
    """Wait for Lite's background worker to finish what it has started, then remove every index
    sidecar left without its segment; False if the worker did not finish within ``timeout``.

    Lite builds segment indexes outside the maintenance lock, on a snapshot of the segments
    taken when its task began. A ``scrub`` that rewrites a segment while its index is being
    built removes the old segment and its sidecars, and the build then writes a sidecar for
    the segment that is gone — with the vectors of the rows the scrub erased — until Lite's
    next background task cleans it up. Once the running task is done, no build still holds a
    segment the scrub removed (tasks run one at a time and snapshot after the scrub), so one
    cleanup removes them all. Not called on the index's thread: the wait can be seconds under
    load and searches go on meanwhile."""
    import concurrent.futures

    try:
        collection._wait_for_bg(timeout=timeout)
    except concurrent.futures.TimeoutError:
        return False
    with collection._maintenance_lock:
        collection._cleanup_orphan_index_files()
    return True


def residue(collection: Any, ids: Iterable[str]) -> tuple[set[str], set[str]]:
    """Which of ``ids`` any file under the collection's folder may still hold: the key column
    of every Parquet (segments, tombstones) and Arrow (write-ahead log) file, every id for an
    index sidecar left without its segment, and the raw bytes of every other file; and the
    kinds of file that held them (``_kind``: for a log line, no ids and no names).

    Reading every segment's keys on every purge grew with the collection (~0.45 s at 4,500
    rows in 400 files, idle; seconds under load), so each key file's keys are remembered as a
    sorted array of 32-bit hashes while the file is unchanged (same inode, size and mtime):
    a file is read again only when one of ``ids`` hashes into it, and then checked exactly."""
    import pyarrow as pa

    wanted = set(ids)
    if not wanted:
        return set(), set()
    pk = collection.pk_field
    found: set[str] = set()
    needles = {i: i.encode() for i in wanted}
    hashes = {i: zlib.crc32(b) for i, b in needles.items()}
    known = _KEY_DIGESTS.setdefault(collection.data_dir, {})
    seen: set[tuple[str, int, int, int]] = set()
    places: set[str] = set()  # which kinds of file held one

    def held_by(folder: str, name: str, path: str) -> set[str]:
        """Which of ``wanted`` the file may hold (see the docstring above)."""
        if name.endswith((".parquet", ".arrow")):
            stat = os.stat(path)
            key = (path, stat.st_ino, stat.st_size, stat.st_mtime_ns)
            seen.add(key)
            keys = None
            if key not in known:
                keys = _key_column(path, pk)
                known[key] = None if keys is None else array.array("I", sorted(zlib.crc32(k.encode()) for k in keys))
            digest = known[key]
            if digest is not None:
                maybe = {i for i, h in hashes.items() if _holds(digest, h)}
                if maybe and keys is None:
                    keys = _key_column(path, pk)
                return maybe & set(keys or ()) if maybe else set()
        if name.endswith(_SIDECARS):
            # An index sidecar can be large (the segment's vectors): it is bound to its
            # segment by name, so one whose segment is gone may hold anything.
            segment = os.path.join(os.path.dirname(folder), "data", name.split(".")[0] + ".parquet")
            return set() if os.path.exists(segment) else wanted
        with open(path, "rb") as fh:
            data = fh.read()
        return {i for i, b in needles.items() if b in data}

    for folder, _dirs, names in os.walk(collection.data_dir):
        for name in names:
            path = os.path.join(folder, name)
            try:
                here = held_by(folder, name, path)
            except (OSError, pa.ArrowException):
                continue  # removed meanwhile, or being written: a later check sees it
            if here:
                found |= here
                places.add(_kind(collection.data_dir, path))
    for gone in set(known) - seen:  # files removed or rewritten since
        del known[gone]
    return found, places


def is_sidecar(kind: str) -> bool:
    """Whether a ``residue`` kind is an index sidecar's."""
    return kind.endswith(_SIDECARS)


# Per collection folder: (path, inode, size, mtime_ns) of a key file → its keys' CRC-32s,
# sorted (None: the file has no key column). 4 bytes a row.
_KEY_DIGESTS: dict[str, dict[tuple[str, int, int, int], array.array[int] | None]] = {}


def _key_column(path: str, pk: str) -> list[str] | None:
    """The key column of a Parquet or Arrow stream file; None if it has none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.endswith(".parquet"):
        if pk not in pq.read_schema(path).names:
            return None
        return [str(k) for k in pq.read_table(path, columns=[pk]).column(pk).to_pylist()]
    with pa.memory_map(path) as source:
        table = pa.ipc.open_stream(source).read_all()
    return [str(k) for k in table.column(pk).to_pylist()] if pk in table.column_names else None


def _kind(root: str, path: str) -> str:
    """A file's kind for a log line: its folders under the collection, partition names
    dropped, and its extension (e.g. ``partitions/data .parquet``, ``wal .arrow``)."""
    parts = os.path.relpath(path, root).split(os.sep)
    folders = [p for i, p in enumerate(parts[:-1]) if not (i == 1 and parts[0] == "partitions")]
    return "/".join(folders) + " " + os.path.splitext(parts[-1])[1]


def _holds(digest: array.array[int], value: int) -> bool:
    at = bisect.bisect_left(digest, value)
    return at < len(digest) and digest[at] == value


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        _log.warning("could not remove a Milvus Lite tombstone file: %s", exc)
