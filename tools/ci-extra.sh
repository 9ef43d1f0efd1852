#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The extra CI stage (run by tools/test.sh after default/asan/tsan): builds
# the libFuzzer harnesses of fuzz/ with clang-14 (ASan + UBSan + libFuzzer)
# and runs each for a bounded time from its seed corpus, then writes one
# JUnit testcase per fuzzer (name, executions in system-out) into
# $HIPLINE_JUNIT_DIR. The bounded soak is a ctest test (reliability_soak_test)
# of the normal stages.
#
#   HIPLINE_JOBS=2 HIPLINE_JUNIT_DIR=build-junit/extra bash tools/ci-extra.sh
#
# Knobs: HIPLINE_FUZZ_SECONDS (default 60 per fuzzer), HIPLINE_SKIP_APT=1,
# HIPLINE_FUZZ_BUILD_DIR (default build-fuzz).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
JOBS=${HIPLINE_JOBS:-2}
JUNIT_DIR=${HIPLINE_JUNIT_DIR:-$ROOT/build-junit/extra}
SECONDS_EACH=${HIPLINE_FUZZ_SECONDS:-60}
BUILD=${HIPLINE_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
mkdir -p "$JUNIT_DIR"

log() { printf '\n==> %s\n' "$*"; }

# clang-14 and its libFuzzer runtime, as tools/test.sh installs packages.
need=()
command -v clang-14 >/dev/null || need+=(clang-14)
if ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a \
  >/dev/null 2>&1; then
  need+=(libclang-rt-14-dev)
fi
if ((${#need[@]} > 0)); then
  if [[ ${HIPLINE_SKIP_APT:-0} == 1 ]]; then
    echo "ci-extra: missing ${need[*]} and HIPLINE_SKIP_APT=1" >&2
    exit 1
  fi
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  log "installing ${need[*]}"
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
    --no-install-recommends "${need[@]}"
fi

log "fuzz: configure and build ($BUILD)"
CC=clang-14 cmake -S fuzz -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target fuzz_env fuzz_replay_log fuzz_api fuzz_code_object

export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }

failed=0
cases=""
for name in fuzz_env fuzz_replay_log fuzz_api fuzz_code_object; do
  corpus_name=${name#fuzz_}
  work=$BUILD/corpus-$corpus_name
  artifacts=$BUILD/artifacts-$corpus_name/
  mkdir -p "$work" "$artifacts"
  out=$BUILD/$name.log
  log "fuzz: $name for ${SECONDS_EACH}s"
  rc=0
  # The runtime warns about unknown HIPLINE_* variables; ours are not its.
  env -u HIPLINE_JUNIT_DIR -u HIPLINE_JOBS -u HIPLINE_FUZZ_SECONDS \
    -u HIPLINE_FUZZ_BUILD_DIR -u HIPLINE_SKIP_APT \
    "$BUILD/fuzz/$name" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
    -timeout=30 -rss_limit_mb=2048 -artifact_prefix="$artifacts" \
    "$work" "fuzz/corpus/$corpus_name" >"$out" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -1)
  execs=${execs:-0}
  printf '%s: %s executions, exit %d\n' "$name" "$execs" "$rc"
  body="<system-out>$name: $execs executions in ${SECONDS_EACH}s</system-out>"
  if ((rc != 0)); then
    failed=$((failed + 1))
    tail -40 "$out"
    body="<failure message=\"exit $rc\">$(tail -40 "$out" | xml_escape)</failure>$body"
  fi
  cases+="<testcase classname=\"fuzz\" name=\"$name\" time=\"$SECONDS_EACH\">$body</testcase>"
done

cat >"$JUNIT_DIR/fuzz.xml" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="fuzz" tests="3" failures="$failed">$cases</testsuite>
XML
exit $((failed > 0))
