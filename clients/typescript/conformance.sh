#!/usr/bin/env bash
# Run the conformance scenario with the TypeScript client (clients/conformance/README.md):
#   bash clients/typescript/conformance.sh SCENARIO CONFIG
# Installs (npm ci) and builds (tsc -p tsconfig.dev.json, into build/: the runner is not part of
# the published package) only when needed; all build output goes to stderr.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
command -v node >/dev/null || { echo "node is not installed (Node 20+ is needed)" >&2; exit 2; }
command -v npm >/dev/null || { echo "npm is not installed" >&2; exit 2; }
# npm ci again when package-lock.json changed since the last install.
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund >&2
fi
# Rebuild when any source, the compiler settings or the installed packages are newer than the last build.
STAMP=build/.build-stamp
if [[ ! -f "$STAMP" ]] || [[ -n "$(find src conformance tsconfig.json tsconfig.dev.json package.json node_modules/.package-lock.json -newer "$STAMP" -print -quit)" ]]; then
  npm run --silent build:dev >&2
  touch "$STAMP"
fi
exec node build/conformance/runner.js "$@"
