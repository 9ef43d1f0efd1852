#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs hipline's hip backend on an NVIDIA GPU through the HIP-on-CUDA bridge
# (tests/hip_cuda_bridge/): builds the kernels' cubin with nvcc from
# kernels/hipline_kernels.hip, then runs every requires-gpu test and the
# other conformance suites with HIPLINE_TEST_BACKEND=hip, with the bridge as
# libamdhip64.so.
#
#   bash tools/gpu/cuda-bridge.sh [BUILD_DIR] [ctest args...]
#   bash tools/gpu/cuda-bridge.sh bench [BUILD_DIR]
#
# bench: instead of the tests, the hip backend's benchmarks, one table:
# multistream (4 queues against 1, the submission latency), serving (5
# runs: ops/s, their median and spread) and the command-buffer benchmark
# (8 commands, one by one against one execution), each also run with
# HL_HIP_TEST_RUNTIME_CALL_COUNTS so the table shows the HIP calls per
# operation from the submitting thread and from hipline's (the difference of
# two run lengths). Multistream and serving run once per completer mode
# (HIPLINE_COMPLETER=poll, the default, and block: docs/backends.md), with
# the completer's calls per serving request-step over five counted runs
# (min/median/max). About three minutes on one GPU.
#
# BUILD_DIR (default build) is a configured and built tree; its ctest file
# names absolute paths, so run this where the tree was built (or behind a
# link to that path). Needs nvcc and libcuda.so.1 (the NVIDIA driver).
# Knobs: HL_CUDA_BRIDGE_ARCH (the gcnArchName the device reports, default
# gfx90a:sramecc+:xnack-), HL_CUDA_BRIDGE_NVCC_ARCH (default native),
# HL_CUDA_BRIDGE_LIBS (more directories for LD_LIBRARY_PATH, e.g. one that
# holds libcmocka.so.0 where it is not installed).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STEP=tests
if [[ ${1:-} == bench ]]; then
  STEP=bench
  shift
fi
BUILD=${1:-$ROOT/build}
shift || true
BUILD=$(cd "$BUILD" && pwd)
BRIDGE_DIR=$BUILD/hip_cuda_bridge
if [[ ! -e $BRIDGE_DIR/libamdhip64.so ]]; then
  echo "cuda-bridge: $BRIDGE_DIR/libamdhip64.so is missing; build the tree" >&2
  exit 2
fi
command -v nvcc >/dev/null || { echo "cuda-bridge: nvcc not found" >&2; exit 2; }

# The cubin: the same kernel source, compiled by nvcc. -fmad=false keeps
# axpy's product and sum separately rounded, as its host oracle expects.
CUBIN=$BRIDGE_DIR/hipline_kernels.cubin
nvcc -x cu -cubin -arch="${HL_CUDA_BRIDGE_NVCC_ARCH:-native}" -fmad=false \
  -O3 -I"$ROOT" -o "$CUBIN" "$ROOT/kernels/hipline_kernels.hip"

export HL_CUDA_BRIDGE_CUBIN=$CUBIN
export LD_LIBRARY_PATH=$BRIDGE_DIR${HL_CUDA_BRIDGE_LIBS:+:$HL_CUDA_BRIDGE_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# The bridge must be what answers: hipline's report names its HIP version.
HIPLINE_BACKEND=hip "$BUILD/bin/hipline-info" || true

if [[ $STEP == bench ]]; then
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
  stress=$BUILD/bin/hipline-stress
  cbbench=$BUILD/bin/hipline-bench-command-buffer
  for mode in poll block; do
    export HIPLINE_COMPLETER=$mode
    # Call counts: two run lengths each; five serving runs of one length.
    for n in 200 400; do
      HL_HIP_TEST_RUNTIME_CALL_COUNTS=$OUT/calls-ms-$mode-$n.txt "$stress" \
        --backend hip --workload multistream --iterations $n >/dev/null
      HL_HIP_TEST_RUNTIME_CALL_COUNTS=$OUT/calls-sv-$mode-$((n / 10)).txt \
        "$stress" --backend hip --workload serving --iterations $((n / 10)) \
        --requests 8 >/dev/null
    done
    for run in 1 2 3 4 5; do
      HL_HIP_TEST_RUNTIME_CALL_COUNTS=$OUT/calls-svrun-$mode-$run.txt \
        "$stress" --backend hip --workload serving --iterations 40 \
        --requests 8 >/dev/null
    done
    # Timings, without the counter.
    "$stress" --backend hip --workload multistream --json "$OUT/ms-$mode.json" \
      >/dev/null
    for run in 1 2 3 4 5; do
      "$stress" --backend hip --workload serving \
        --json "$OUT/sv-$mode-$run.json" >/dev/null
    done
  done
  unset HIPLINE_COMPLETER
  for e in 100 200; do
    HL_HIP_TEST_RUNTIME_CALL_COUNTS=$OUT/calls-cb-$e.txt "$cbbench" --backend hip \
      --ops 8 --samples 5 --executions $e --tensors 16 >/dev/null
  done
  "$cbbench" --backend hip --ops 8 --samples 21 --executions 100 --json \
    >"$OUT/cb.json"
  python3 "$ROOT/tools/gpu/bench_table.py" "$OUT"
  exit 0
fi

# requires-gpu: the hip copies of the conformance suites and the hip
# backend's GPU suite. Then the cts suites whose hip copies exist only on
# the test runtime (their *_hiprt tests), run here on the bridge.
status=0
ctest --test-dir "$BUILD" -L requires-gpu --output-on-failure "$@" || status=1
mapfile -t hiprt < <(ctest --test-dir "$BUILD" -N -L cts |
  sed -n 's/^ *Test *#[0-9]*: \(.*\)_hiprt$/\1/p')
for exe in "${hiprt[@]}"; do
  if ctest --test-dir "$BUILD" -N -R "^${exe}_hip\$" | grep -q "Total Tests: 1"; then
    continue  # Already run above.
  fi
  echo "==> $exe on the bridge"
  if ! HIPLINE_TEST_BACKEND=hip timeout 300 "$BUILD/bin/$exe"; then
    echo "cuda-bridge: $exe FAILED" >&2
    status=1
  fi
done
exit $status
