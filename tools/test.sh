#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The whole test suite, as CI runs it (.ci/run execs this).
#
#   bash tools/test.sh
#
# On Debian 12 as root it installs what it needs with apt-get (only when a
# package is missing), then runs these stages and stops at the first failure:
#
#   default  build/       RelWithDebInfo, -Werror        ctest (everything)
#   workers  build/       the same build, HIPLINE_HOST_INLINE=0: every
#                         stream item on its worker    ctest (everything)
#   driver   build/       the same build, HIPLINE_ALLOCATOR=driver: the
#                         conformance suite and the memory and reliability
#                         suites (the soak too) on the backend's own pool
#                         (the default is hipline's suballocator)
#                                                      ctest -L cts|memory|reliability
#   asan     build-asan/  ASan + UBSan                   ctest (everything)
#   tsan     build-tsan/  TSan                           ctest -L concurrency,
#                         then again with HIPLINE_ALLOCATOR=driver
#                         (test preset tsan-driver)
#   extra    tools/ci-extra.sh, when it exists (fuzzers, soak)
#
# The stages use the presets of CMakePresets.json. It ends with one line per
# stage and a final line "N passed, N failed" (ctest counts summed across
# stages; skipped tests are in neither number).
#
# Knobs (environment): HIPLINE_JOBS (default 2) for build and ctest
# parallelism; HIPLINE_SKIP_APT=1 to never call apt-get.
#
# tools/ci-extra.sh contract: it runs from the repository root with
# HIPLINE_JOBS and HIPLINE_JUNIT_DIR set; JUnit files (*.xml) it writes into
# HIPLINE_JUNIT_DIR are counted like ctest's. A non-zero exit fails the stage.
# Without JUnit files the stage counts as one check.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
JOBS=${HIPLINE_JOBS:-2}
export HIPLINE_JOBS=$JOBS

REQUIRED_PACKAGES=(
  cmake make gcc libc6-dev pkgconf python3
  libcmocka-dev libmsgpack-dev libamdhip64-dev hipcc rocm-device-libs clang-19 lld-19
  clang-14 libclang-rt-14-dev
  gnuplot-nox
  python3-venv python3-pip python3-setuptools python3-wheel
  python3-aiohttp  # bench/serve/serve.py and its loopback check (python.serve)
  mypy  # type-checks the Python package's hints (python.typecheck)
)
OPTIONAL_PACKAGES=(valgrind)

TOTAL_PASSED=0
TOTAL_FAILED=0
SUMMARY=()
START_TIME=$SECONDS

log() { printf '\n==> %s\n' "$*"; }
warn() { printf 'test.sh: warning: %s\n' "$*" >&2; }

elapsed() {
  local s=$(($1))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}

print_summary() {
  printf '\n==> summary (%s total)\n' "$(elapsed $((SECONDS - START_TIME)))"
  local line
  for line in "${SUMMARY[@]+"${SUMMARY[@]}"}"; do
    printf '%s\n' "$line"
  done
  printf '%d passed, %d failed\n' "$TOTAL_PASSED" "$TOTAL_FAILED"
}

# Stops the run: the message, the stages so far, and the totals line.
die() {
  printf '\ntest.sh: FAILED: %s\n' "$*" >&2
  print_summary
  exit 1
}

#------------------------------------------------------------------------------
# Packages
#------------------------------------------------------------------------------

missing_packages() {
  local pkg
  for pkg in "$@"; do
    if ! [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) == installed ]]; then
      printf '%s\n' "$pkg"
    fi
  done
}

ensure_packages() {
  if [[ ${HIPLINE_SKIP_APT:-0} == 1 ]]; then
    log "packages: HIPLINE_SKIP_APT=1, not checking"
    return
  fi
  if ! command -v dpkg >/dev/null || ! command -v apt-get >/dev/null; then
    warn "no dpkg/apt-get here; assuming the tools are installed:"
    warn "  ${REQUIRED_PACKAGES[*]}"
    return
  fi
  local missing optional
  mapfile -t missing < <(missing_packages "${REQUIRED_PACKAGES[@]}")
  mapfile -t optional < <(missing_packages "${OPTIONAL_PACKAGES[@]}")
  if ((${#missing[@]} == 0 && ${#optional[@]} == 0)); then
    log "packages: all installed"
    return
  fi
  local sudo=()
  if ((EUID != 0)); then
    if command -v sudo >/dev/null; then
      sudo=(sudo)
    elif ((${#missing[@]} > 0)); then
      die "missing packages and not root: apt-get install ${missing[*]}"
    else
      warn "optional packages missing (not root): ${optional[*]}"
      return
    fi
  fi
  log "packages: installing ${missing[*]} ${optional[*]}"
  "${sudo[@]}" apt-get update -q || die "apt-get update failed"
  if ((${#missing[@]} > 0)); then
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
      --no-install-recommends "${missing[@]}" ||
      die "apt-get install ${missing[*]} failed"
  fi
  if ((${#optional[@]} > 0)); then
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
      --no-install-recommends "${optional[@]}" ||
      warn "optional packages not installed: ${optional[*]}"
  fi
}

#------------------------------------------------------------------------------
# Sanitizer environment probes
#------------------------------------------------------------------------------

PROBE_DIR=$(mktemp -d)
trap 'rm -rf "$PROBE_DIR"' EXIT

# LeakSanitizer needs ptrace-like access that some containers deny; then it
# aborts every test. Keep leak checking whenever it works.
configure_asan_env() {
  local dir=$PROBE_DIR
  printf '#include <stdlib.h>\nint main(void) { free(malloc(8)); return 0; }\n' \
    >"$dir/asan.c"
  local cc
  cc=$(cmake_c_compiler build-asan)
  "$cc" -fsanitize=address,undefined "$dir/asan.c" -o "$dir/asan" ||
    die "cannot build an ASan program with $cc"
  local opts="abort_on_error=1:detect_stack_use_after_return=1"
  if ASAN_OPTIONS="detect_leaks=1" "$dir/asan" >"$dir/asan.log" 2>&1; then
    opts="$opts:detect_leaks=1"
  else
    warn "LeakSanitizer does not work here; ASan runs without leak checks:"
    sed 's/^/    /' "$dir/asan.log" >&2 || true
    opts="$opts:detect_leaks=0"
  fi
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}$opts"
}

# gcc 12's TSan cannot handle the address layout that newer kernels give with
# high mmap randomisation ("FATAL: ThreadSanitizer: unexpected memory
# mapping"). Disabling ASLR for the test run (setarch -R) is the workaround.
# Sets TSAN_PREFIX to the command prefix the TSan tests need.
TSAN_PREFIX=()
configure_tsan_env() {
  local dir=$PROBE_DIR cc
  cc=$(cmake_c_compiler build-tsan)
  cat >"$dir/tsan.c" <<'EOF'
#include <pthread.h>
static void* run(void* arg) { return arg; }
int main(void) {
  pthread_t t;
  if (pthread_create(&t, 0, run, 0) != 0) return 1;
  return pthread_join(t, 0);
}
EOF
  "$cc" -fsanitize=thread -pthread "$dir/tsan.c" -o "$dir/tsan" ||
    die "cannot build a TSan program with $cc"
  if "$dir/tsan" >"$dir/tsan.log" 2>&1; then
    TSAN_PREFIX=()
    return
  fi
  local arch
  arch=$(uname -m)
  if command -v setarch >/dev/null &&
    setarch "$arch" -R "$dir/tsan" >"$dir/tsan-setarch.log" 2>&1; then
    warn "TSan fails with ASLR on this kernel; running TSan tests under" \
      "'setarch $arch -R':"
    sed 's/^/    /' "$dir/tsan.log" | head -5 >&2 || true
    TSAN_PREFIX=(setarch "$arch" -R)
    return
  fi
  sed 's/^/    /' "$dir/tsan.log" >&2 || true
  die "a trivial TSan program fails here, even under 'setarch $arch -R'" \
    "(try: sysctl vm.mmap_rnd_bits=28)"
}

# The C compiler a build directory was configured with (cc before that).
cmake_c_compiler() {
  local cache="$ROOT/$1/CMakeCache.txt" cc=""
  if [[ -f $cache ]]; then
    cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$cache" | head -1)
  fi
  printf '%s' "${cc:-${CC:-cc}}"
}

#------------------------------------------------------------------------------
# Stages
#------------------------------------------------------------------------------

# Reads a ctest JUnit file and prints "passed failed skipped".
count_junit() {
  python3 - "$@" <<'EOF'
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as error:
        print(f"test.sh: cannot read {path}: {error}", file=sys.stderr)
        failed += 1
        continue
    for case in root.iter("testcase"):
        status = case.get("status")
        if status is None:
            # Generic JUnit: a child element says what happened.
            if case.find("failure") is not None or case.find("error") is not None:
                status = "fail"
            elif case.find("skipped") is not None:
                status = "notrun"
            else:
                status = "run"
        if status == "run":
            passed += 1
        elif status in ("notrun", "disabled"):
            skipped += 1
        else:
            failed += 1
print(passed, failed, skipped)
EOF
}

# stage_result NAME STATUS PASSED FAILED SKIPPED SECONDS
stage_result() {
  TOTAL_PASSED=$((TOTAL_PASSED + $3))
  TOTAL_FAILED=$((TOTAL_FAILED + $4))
  SUMMARY+=("$(printf 'stage %-8s %-6s %3d passed, %d failed, %d skipped (%s)' \
    "$1" "$2" "$3" "$4" "$5" "$(elapsed "$6")")")
}

# run_ctest_stage NAME [PREFIX...] -- runs `ctest --preset NAME` (behind the
# command PREFIX, if any) and records the counts; stops the run when a test
# fails. The stage time counts from build_stage.
STAGE_T0=$SECONDS
run_ctest_stage() {
  local name=$1
  shift
  local junit="$ROOT/build-junit/$name.xml" t0=$STAGE_T0
  mkdir -p "$ROOT/build-junit"
  rm -f "$junit"
  log "$name: ctest"
  local rc=0
  "$@" ctest --preset "$name" -j "$JOBS" --output-junit "$junit" || rc=$?
  local counts=(0 0 0)
  if [[ -f $junit ]]; then
    read -r -a counts < <(count_junit "$junit")
  fi
  if ((rc != 0)); then
    # ctest failed without a failing test (a bad filter, a crash): count it.
    if ((counts[1] == 0)); then counts[1]=1; fi
    stage_result "$name" FAILED "${counts[@]}" $((SECONDS - t0))
    die "stage $name: ctest exited $rc (failing tests above; re-run with" \
      "'ctest --preset $name --output-on-failure')"
  fi
  stage_result "$name" ok "${counts[@]}" $((SECONDS - t0))
}

build_stage() {
  local name=$1 t0=$SECONDS
  STAGE_T0=$t0
  log "$name: configure (cmake --preset $name)"
  cmake --preset "$name" ||
    { stage_result "$name" FAILED 0 1 0 $((SECONDS - t0)); die "stage $name: configure failed"; }
  log "$name: build"
  cmake --build --preset "$name" -j "$JOBS" ||
    { stage_result "$name" FAILED 0 1 0 $((SECONDS - t0)); die "stage $name: build failed"; }
}

stage_default() {
  build_stage default
  run_ctest_stage default
}

# The host backend runs the runtime's own work inline on idle streams; this
# stage runs everything again with all of it on the stream workers, the
# path every busy stream takes, so neither path goes untested.
stage_workers() {
  STAGE_T0=$SECONDS
  run_ctest_stage workers
}

# queue_alloca is served by hipline's suballocator unless HIPLINE_ALLOCATOR
# says driver: this stage runs the suites that allocate through queue_alloca
# again with the backend's pool, so both allocators pass them.
stage_driver() {
  STAGE_T0=$SECONDS
  run_ctest_stage driver
}

stage_asan() {
  build_stage asan
  configure_asan_env
  run_ctest_stage asan
}

stage_tsan() {
  build_stage tsan
  configure_tsan_env
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}second_deadlock_stack=1"
  run_ctest_stage tsan "${TSAN_PREFIX[@]+"${TSAN_PREFIX[@]}"}"
  # Again with the backend's pool, whose allocas and deallocas always run on
  # the stream (hipline's run at once on quiet queues).
  STAGE_T0=$SECONDS
  run_ctest_stage tsan-driver "${TSAN_PREFIX[@]+"${TSAN_PREFIX[@]}"}"
}

stage_extra() {
  local script="$ROOT/tools/ci-extra.sh" t0=$SECONDS
  if [[ ! -f $script ]]; then
    SUMMARY+=("stage extra    skipped (no tools/ci-extra.sh)")
    return
  fi
  local junit_dir="$ROOT/build-junit/extra"
  rm -rf "$junit_dir"
  mkdir -p "$junit_dir"
  log "extra: bash tools/ci-extra.sh"
  local rc=0
  HIPLINE_JUNIT_DIR=$junit_dir bash "$script" || rc=$?
  local files=() counts=(0 0 0)
  mapfile -t files < <(find "$junit_dir" -name '*.xml' -type f | sort)
  if ((${#files[@]} > 0)); then
    read -r -a counts < <(count_junit "${files[@]}")
  elif ((rc == 0)); then
    counts=(1 0 0)
  fi
  if ((rc != 0)); then
    if ((counts[1] == 0)); then counts[1]=1; fi
    stage_result extra FAILED "${counts[@]}" $((SECONDS - t0))
    die "stage extra: tools/ci-extra.sh exited $rc"
  fi
  stage_result extra ok "${counts[@]}" $((SECONDS - t0))
}

ensure_packages
for tool in cmake ctest python3; do
  command -v "$tool" >/dev/null || die "$tool not found"
done
stage_default
stage_workers
stage_driver
stage_asan
stage_tsan
stage_extra
print_summary
