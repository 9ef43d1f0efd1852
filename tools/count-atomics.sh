#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Counts the instructions and the locked (atomic read-modify-write)
# instructions one alloca+dealloca pair, or one empty submission, executes
# on the host backend (docs/benchmarks.md, "Count instead of timing").
#
#   bash tools/count-atomics.sh [BUILD_DIR] [pair|barrier] [N]
#
# BUILD_DIR (default build) must hold lib/libhipline.a. The loop
# (tools/atomics/loop.c) is linked statically, so libc's locks count too,
# and runs N times (default 20,000) under valgrind's callgrind; the totals
# include the setup, spread over N. Needs gcc, valgrind, objdump, python3.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-build}
MODE=${2:-pair}
N=${3:-20000}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LIB=$BUILD/lib/libhipline.a
[[ -f $LIB ]] || { echo "count-atomics: no $LIB (build first)" >&2; exit 1; }
for tool in gcc valgrind objdump python3; do
  command -v "$tool" >/dev/null || { echo "count-atomics: needs $tool" >&2; exit 1; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# The archive's HIP loader references libdl symbols; a static link warns
# about dlopen, which the host backend never reaches. -flto: the library's
# objects carry LTO bytecode when it was built with HIPLINE_LTO (the
# default), and the loop is then optimized across it as the benchmarks are;
# without it the machine code in the same objects is linked.
gcc -O2 -g -flto=auto -static -I"$ROOT/include" "$ROOT/tools/atomics/loop.c" "$LIB" \
  -lpthread -ldl -lm -o "$WORK/loop" 2> "$WORK/link.log" ||
  { cat "$WORK/link.log" >&2; exit 1; }
HIPLINE_BACKEND=host valgrind --tool=callgrind --dump-instr=yes \
  --compress-pos=no --compress-strings=no \
  --callgrind-out-file="$WORK/callgrind.out" "$WORK/loop" "$MODE" "$N" \
  > /dev/null 2> "$WORK/valgrind.log" ||
  { cat "$WORK/valgrind.log" >&2; exit 1; }
echo "$MODE x $N on the host backend, $LIB:"
python3 "$ROOT/tools/atomics/count.py" "$WORK/loop" "$WORK/callgrind.out" "$N"
