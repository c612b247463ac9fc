"""What this process is: memoryd's version, the Python running it and, when known, the git
commit it was built from (the ``memoryd.build.info`` metric, the resource's ``service.version``).

The commit comes from ``_build_commit`` beside this module when a build wrote one (for example
``git rev-parse HEAD > server/memoryd/server/_build_commit`` before ``pip wheel``), else from
the git checkout this module runs from (a development install), else it is unknown ("").
"""

from __future__ import annotations

import functools
import platform
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from opentelemetry.sdk.resources import Resource

_HERE = Path(__file__).resolve().parent
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")


@dataclass(frozen=True)
class BuildInfo:
    version: str
    python_version: str
    commit: str


@functools.cache
def build_info() -> BuildInfo:
    try:
        version = metadata.version("memoryd")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return BuildInfo(version, platform.python_version(), _commit())


def _commit() -> str:
    written = _HERE / "_build_commit"
    if written.is_file():
        text = written.read_text().strip()
        return text if _COMMIT.fullmatch(text) else ""
    if "site-packages" in _HERE.parts:  # an installed copy: an enclosing checkout is not its source
        return ""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_HERE, capture_output=True, text=True, timeout=2,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    text = done.stdout.strip()
    return text if done.returncode == 0 and _COMMIT.fullmatch(text) else ""


def resource() -> Resource:
    """What every span and metric of this process says about it."""
    return Resource.create({"service.name": "memoryd", "service.version": build_info().version})
