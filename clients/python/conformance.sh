#!/usr/bin/env bash
# The Python conformance runner: bash clients/python/conformance.sh SCENARIO CONFIG
# (clients/conformance/README.md). Nothing to build: it runs memoryd.client from this folder
# with the Python that has the client's dependencies — $MEMORYD_PYTHON, else the project's
# .venv (make install), else python3.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${MEMORYD_PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python="python3"; fi
fi
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" -m memoryd.client.conformance "$@"
