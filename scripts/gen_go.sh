#!/usr/bin/env bash
# Generate the Go code for the memoryd contract (clients/go/gen/memoryd/v1, package memorydv1).
#
#     bash scripts/gen_go.sh [OUT_DIR]        # default: clients/go
#
# Installs the pinned protoc plugins into .build/go/bin (project-local, gitignored) and runs the
# protoc bundled with grpcio-tools over protos/memoryd/v1/*.proto. The output is committed;
# tests/toolchains/test_go_drift.py regenerates into a temporary directory and fails when the
# committed files differ. Each proto's `option go_package` names the import path; module= strips the
# module prefix so the files land in OUT/gen/memoryd/v1. buf.gen.yaml runs the same plugins.
# buf/validate/validate.proto (protovalidate's rules, vendored in protos/) is only imported, never
# generated here: its go_package is buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate,
# which clients/go/go.mod requires at the release matching the vendored file.
# MEMORYD_PYTHON names the Python that has grpcio-tools (default: .venv/bin/python, else python3).
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12      # google.golang.org/protobuf, as in clients/go/go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc
MODULE=github.com/memoryd/memoryd/clients/go   # clients/go/go.mod; the protos' go_package is under it

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/clients/go}"
PY="${MEMORYD_PYTHON:-}"
if [[ -z "$PY" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
command -v go >/dev/null || { echo "gen_go.sh: the Go toolchain (go) is not installed" >&2; exit 1; }

GOBIN_DIR="$ROOT/.build/go/bin"
mkdir -p "$GOBIN_DIR"
install_plugin() {  # name, package@version: reinstall only when the pinned version changes
  local name=$1 pkg=$2 stamp="$GOBIN_DIR/.$1.version"
  if [[ ! -x "$GOBIN_DIR/$name" || "$(cat "$stamp" 2>/dev/null)" != "$pkg" ]]; then
    GOBIN="$GOBIN_DIR" go install "$pkg" >&2
    echo "$pkg" > "$stamp"
  fi
}
install_plugin protoc-gen-go "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
install_plugin protoc-gen-go-grpc "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

WELL_KNOWN="$("$PY" -c 'from importlib import resources; print(resources.files("grpc_tools") / "_proto")')"
cd "$ROOT/protos"
SOURCES=(memoryd/v1/*.proto)
GO_OPTS="module=$MODULE"

rm -rf "$OUT/gen/memoryd/v1"
mkdir -p "$OUT"
"$PY" -m grpc_tools.protoc -I. -I"$WELL_KNOWN" \
  --plugin=protoc-gen-go="$GOBIN_DIR/protoc-gen-go" \
  --plugin=protoc-gen-go-grpc="$GOBIN_DIR/protoc-gen-go-grpc" \
  --go_out="$OUT" --go_opt="$GO_OPTS" \
  --go-grpc_out="$OUT" --go-grpc_opt="$GO_OPTS" \
  "${SOURCES[@]}"
ls "$OUT/gen/memoryd/v1"
