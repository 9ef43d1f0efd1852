#!/usr/bin/env bash
# Runs hipline's hip backend on an NVIDIA GPU through the HIP-on-CUDA bridge
# (tests/hip_cuda_bridge/): builds the kernels' cubin with nvcc from
# kernels/hipline_kernels.hip, then runs every requires-gpu test and the
# other conformance suites with HIPLINE_TEST_BACKEND=hip, with the bridge as
# libamdhip64.so.
#
#   bash tools/gpu/cuda-bridge.sh [BUILD_DIR] [ctest args...]
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
