#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Converts the shared real traces and parses the results with the C parser.

Usage: real_traces_test.py --converter PATH --checker PATH --traces DIR --out DIR

Exits 77 (ctest: skipped) when the traces are absent. Fails unless every trace
converts, the C parser (replay_log_test --check-csv) reads every CSV, both
count allocations and a positive peak of live bytes, and the converter's and
the parser's allocs, frees and peak agree.
"""

import argparse
import os
import re
import subprocess
import sys

TRACES = ("opt-finetune.snapshot.pickle", "pytorch-ddp-v100.kineto.json.gz")
KEYS = ("allocs", "frees", "peak_live_bytes")


def fields(text):
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--converter", required=True)
    parser.add_argument("--checker", required=True)
    parser.add_argument("--traces", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    missing = [t for t in TRACES
               if not os.path.isfile(os.path.join(args.traces, t))]
    if missing:
        print(f"SKIP: {', '.join(missing)} not found in {args.traces}")
        return 77
    os.makedirs(args.out, exist_ok=True)

    failures = 0
    for trace in TRACES:
        csv = os.path.join(args.out, trace.split(".")[0] + ".csv")
        converted = subprocess.run(
            [sys.executable, args.converter, os.path.join(args.traces, trace),
             "-o", csv], capture_output=True, text=True, timeout=90)
        sys.stdout.write(converted.stderr)
        if converted.returncode != 0:
            print(f"FAIL: converting {trace} exited {converted.returncode}")
            failures += 1
            continue
        checked = subprocess.run([args.checker, "--check-csv", csv],
                                 capture_output=True, text=True, timeout=60)
        sys.stdout.write(checked.stdout + checked.stderr)
        if checked.returncode != 0:
            print(f"FAIL: the C parser rejected {csv}")
            failures += 1
            continue
        python, c = fields(converted.stderr), fields(checked.stdout)
        for key in KEYS:
            if python.get(key) != c.get(key):
                print(f"FAIL: {trace}: converter {key}={python.get(key)} but "
                      f"C parser {key}={c.get(key)}")
                failures += 1
        if c.get("allocs", 0) == 0 or c.get("peak_live_bytes", 0) == 0:
            print(f"FAIL: {trace}: no allocations or no live bytes")
            failures += 1
        if c.get("unknown_frees", 1) != 0 or c.get("size_mismatches", 1) != 0:
            print(f"FAIL: {trace}: the CSV frees pointers that are not live "
                  "or with sizes that differ from their allocations")
            failures += 1
    print("PASS" if failures == 0 else f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
