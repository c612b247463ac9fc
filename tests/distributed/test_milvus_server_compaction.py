"""Physical erasure on a Milvus server (the distributed shape's 2.3.5 standalone): what
``MilvusIndex.compact`` does there, and what it cannot reach."""

from __future__ import annotations

import struct
from pathlib import Path

from memoryd.storage import MilvusIndex

from ..storage.test_milvus_index import DIM, MODEL, memory, random_vector
from ..support import unique
from ..support_distributed import MilvusStandalone


def insert_logs(root: Path) -> dict[str, bytes]:
    """The server's insert binlogs under ``root``, concatenated per segment."""
    segments: dict[str, bytes] = {}
    for folder in root.rglob("insert_log"):
        for path in folder.rglob("*"):
            if path.is_file():
                segment = path.relative_to(folder).parts[2]  # collection / partition / segment / ...
                segments[segment] = segments.get(segment, b"") + path.read_bytes()
    return segments


async def test_compact_on_a_milvus_server_rewrites_the_segment_and_cannot_read_its_files(
        milvus_standalone: MilvusStandalone) -> None:
    # The server is shared with the lane's other tests and may still be compacting what they
    # left: an erasure round waits up to 4 minutes (and the next round tries again), this test
    # as long as that, since what it checks is what the job did.
    index = MilvusIndex(milvus_standalone.uri, model_id=MODEL, dim=DIM)
    try:
        tenant, ms = unique("t"), [memory(key=f"key-{i}") for i in range(3)]
        for i, m in enumerate(ms):
            await index.partition(tenant).upsert([m], [random_vector(i)])
        vectors = await index.partition(tenant).vectors([m.id for m in ms])
        await index.partition(tenant).delete([ms[0].id, ms[1].id])
        assert await index.partition(tenant).count() == 1  # read strongly: the delete is seen at once

        assert await index.compact()  # flushed, compacted, and the job reported Completed

        assert await index.residue([ms[0].id]) is None  # a server's files are not ours to read
        packed = {m.id: struct.pack(f"<{DIM}f", *vectors[m.id]) for m in ms}
        segments = insert_logs(milvus_standalone.root)
        # The compacted segment holds only the kept row; the replaced ones wait for the
        # server's garbage collection (dataCoord.gc.dropTolerance, 3 h by default).
        assert any(packed[ms[2].id] in b and not any(packed[m.id] in b for m in ms[:2]) for b in segments.values())
        assert any(packed[ms[0].id] in b for b in segments.values())
    finally:
        await index.close()
