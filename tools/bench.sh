#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The main job, from a fresh Debian 12 machine:
#
#   bash tools/bench.sh [args...]
#
# Installs what it needs with apt-get (only when a package is missing),
# configures build/ (the `default` preset of CMakePresets.json,
# RelWithDebInfo), builds only the main job's programs (hipline-stress,
# hipline-info; not the tests), then runs build/bin/hipline-stress with
# |args| when that program exists, otherwise build/bin/hipline-info.
#
# stdout carries only the main job's results (`bash tools/bench.sh >
# out.txt`): the table, its legend and the closing verdict line. Progress
# goes to stderr; apt-get's and the build's output go to build/bench-setup.log
# and are printed to stderr only when a step fails.
#
# Knobs (environment): HIPLINE_JOBS (default 2) for the build;
# HIPLINE_SKIP_APT=1 to never call apt-get.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
JOBS=${HIPLINE_JOBS:-2}

PACKAGES=(
  cmake make gcc libc6-dev python3 gnuplot-nox
  libcmocka-dev libamdhip64-dev hipcc rocm-device-libs clang-19 lld-19
)

SETUP_LOG=$ROOT/build/bench-setup.log
mkdir -p "$ROOT/build"
: >"$SETUP_LOG"

log() { printf '==> %s\n' "$*" >&2; }
# Runs a setup step with its output in $SETUP_LOG; on failure the output
# goes to stderr.
quietly() {
  local start
  start=$(wc -l <"$SETUP_LOG")
  if ! "$@" >>"$SETUP_LOG" 2>&1; then
    tail -n "+$((start + 1))" "$SETUP_LOG" >&2
    return 1
  fi
}
die() {
  printf 'bench.sh: FAILED: %s\n' "$*" >&2
  exit 1
}

ensure_packages() {
  if [[ ${HIPLINE_SKIP_APT:-0} == 1 ]]; then return; fi
  if ! command -v dpkg >/dev/null || ! command -v apt-get >/dev/null; then
    log "no dpkg/apt-get here; assuming installed: ${PACKAGES[*]}"
    return
  fi
  local missing=() pkg
  for pkg in "${PACKAGES[@]}"; do
    if ! [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) == installed ]]; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then return; fi
  local sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null ||
      die "missing packages and not root: apt-get install ${missing[*]}"
    sudo=(sudo)
  fi
  log "installing ${missing[*]} (output in $SETUP_LOG)"
  quietly "${sudo[@]}" apt-get update -q || die "apt-get update failed"
  quietly "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${missing[@]}" ||
    die "apt-get install ${missing[*]} failed"
}

ensure_packages
log "configure build/ (cmake --preset default)"
quietly cmake --preset default || die "configure failed"
log "build hipline-stress and hipline-info in build/ (output in $SETUP_LOG)"
quietly cmake --build --preset default -j "$JOBS" \
  --target hipline-stress hipline-info || die "build failed"

if [[ -x build/bin/hipline-stress ]]; then
  log "run build/bin/hipline-stress $*"
  exec build/bin/hipline-stress "$@"
fi
log "run build/bin/hipline-info $*"
exec build/bin/hipline-info "$@"
