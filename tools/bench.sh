#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine:
#
#   bash tools/bench.sh [args...]
#
# Installs what it needs with apt-get (only when a package is missing),
# configures and builds build/ (the `default` preset of CMakePresets.json,
# RelWithDebInfo), then runs build/bin/hipline-stress with |args| when that
# program exists, otherwise build/bin/hipline-info with |args|.
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

log() { printf '==> %s\n' "$*" >&2; }
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
  log "installing ${missing[*]}"
  "${sudo[@]}" apt-get update -q || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
    --no-install-recommends "${missing[@]}" ||
    die "apt-get install ${missing[*]} failed"
}

ensure_packages
log "configure build/ (cmake --preset default)"
cmake --preset default >/dev/null || {
  cmake --preset default >&2 || true
  die "configure failed"
}
log "build build/"
cmake --build --preset default -j "$JOBS" >&2 || die "build failed"

if [[ -x build/bin/hipline-stress ]]; then
  log "run build/bin/hipline-stress $*"
  exec build/bin/hipline-stress "$@"
fi
log "run build/bin/hipline-info $*"
exec build/bin/hipline-info "$@"
