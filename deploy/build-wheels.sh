#!/bin/sh
# Build the two wheels a memoryd install needs into one folder:
#   memoryd_client-<v>-py3-none-any.whl  from clients/python (memoryd.v1 stubs, memoryd.client)
#   memoryd-<v>-py3-none-any.whl         from the repository root (server, storage, CLI)
#
#   deploy/build-wheels.sh OUT_DIR        # from anywhere; PYTHON picks the interpreter
#
# memoryd depends on memoryd-client==<v>, which is on no registry: install both files by
# path, as deploy/Dockerfile does, so pip takes memoryd-client from the file and fetches only
# the third-party dependencies:
#   pip install OUT_DIR/memoryd_client-*.whl "$(ls OUT_DIR/memoryd-*.whl)[otlp]"
# The Dockerfile and tests/toolchains/test_image_build.py both run this script.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

mkdir -p "$out"
rm -f "$out"/memoryd-*.whl "$out"/memoryd_client-*.whl
# --no-deps: only these two projects are built here; their dependencies come from the index
# at install time. The build backend (hatchling) is fetched into an isolated build env.
"$python" -m pip wheel --quiet --no-deps --wheel-dir "$out" "$root/clients/python" "$root"
ls "$out"/memoryd_client-*.whl "$out"/memoryd-*.whl
