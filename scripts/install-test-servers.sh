#!/usr/bin/env bash
# The real servers the distributed tests run against, installed by the project itself so a
# clean checkout (and CI) has them:
#   - Debian's PostgreSQL server (an external server, not the embedded one), via apt when
#     its binaries are missing (needs root, as on the CI machine);
#   - a Milvus standalone server: the PyPI package `milvus` (Linux wheel) bundles one. It
#     lives in its own venv (.build/milvus-server) because it shares nothing with memoryd's.
# Idempotent: a second run checks and returns.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
MILVUS_VERSION=2.3.5
VENV=.build/milvus-server

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "install-test-servers: PostgreSQL server binaries are missing; run as root or 'apt-get install postgresql'" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    # The Debian package starts a cluster of its own; the tests start theirs.
    (pg_ctlcluster --help >/dev/null 2>&1 && for c in /etc/postgresql/*/main; do
        v=$(basename "$(dirname "$c")"); pg_ctlcluster "$v" main stop || true; done) || true
fi

# With UV (the Makefile passes the venv's uv, and pip's settings as PIP_FLAGS_FOR_UV) ~1 s
# from uv's cache; pip takes ~8 s.
if ! "$VENV/bin/python" -c "import milvus, sys; sys.exit(milvus.__version__ != '$MILVUS_VERSION')" 2>/dev/null; then
    rm -rf "$VENV"
    if [ -x "${UV:-}" ]; then
        "$UV" venv --quiet --python "$PYTHON" "$VENV"
        "$UV" pip install --quiet --python "$VENV/bin/python" ${PIP_FLAGS_FOR_UV:-} "milvus==$MILVUS_VERSION"
    else
        "$PYTHON" -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "milvus==$MILVUS_VERSION"
    fi
fi
