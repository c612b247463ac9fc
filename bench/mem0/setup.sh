#!/usr/bin/env bash
# Creates the Mem0 benchmark's own virtualenv (default .build/mem0-venv, gitignored) with the
# pinned packages of bench/mem0/requirements.txt, apart from the server's .venv: mem0ai pulls
# openai, sqlalchemy, posthog and more that memoryd does not need. Re-run is cheap: it
# reinstalls only when requirements.txt changed. Fails loudly if anything cannot be installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${MEM0_VENV:-$root/.build/mem0-venv}"
python="${PYTHON:-python3}"
stamp="$venv/.requirements-stamp"
if [[ -f "$stamp" ]] && cmp -s "$stamp" "$here/requirements.txt"; then
  exit 0
fi
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt" >&2
cp "$here/requirements.txt" "$stamp"
echo "mem0 benchmark virtualenv ready: $venv" >&2
