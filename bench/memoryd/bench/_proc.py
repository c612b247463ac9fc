"""Resident size and CPU time of a benchmarked server and the processes it runs, read from Linux /proc."""

from __future__ import annotations

import os
from pathlib import Path


def vmrss(pid: int) -> int | None:
    """VmRSS of ``pid`` in bytes; None if it cannot be read (gone, a zombie, not Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds ``pid`` has used; None if it cannot be read."""
    try:
        # Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found.extend(int(c) for c in (task / "children").read_text().split())
    except (OSError, ValueError):
        pass
    return found


def using(folder: Path) -> list[int]:
    """Processes whose command line names ``folder`` (the embedded Postgres runs detached)."""
    needle = str(folder).encode()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def resident(pid: int | None, data_dir: Path | None = None) -> tuple[int | None, int | None]:
    """(VmRSS of ``pid``, VmRSS summed over it, its descendants and any process naming
    ``data_dir`` on its command line, i.e. the embedded Postgres) in bytes."""
    if pid is None:
        return None, None
    own = vmrss(pid)
    total, stack, seen = 0, [pid, *(using(data_dir) if data_dir is not None else [])], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        total += vmrss(current) or 0
        stack.extend(children(current))
    return own, total
