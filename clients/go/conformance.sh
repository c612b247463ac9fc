#!/usr/bin/env bash
# Run the shared conformance scenario with the Go client:
#     bash clients/go/conformance.sh SCENARIO CONFIG
# Builds cmd/conformance (incrementally, through the Go build cache) into .build/go/, with all
# build output on stderr, then runs it: one "ok"/"FAIL" line per step on stdout.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
command -v go >/dev/null || { echo "conformance.sh: the Go toolchain (go) is not installed" >&2; exit 1; }
BIN="$ROOT/.build/go/conformance"
mkdir -p "$(dirname "$BIN")"
(cd "$HERE" && go build -o "$BIN" ./cmd/conformance) >&2
exec "$BIN" "$@"
