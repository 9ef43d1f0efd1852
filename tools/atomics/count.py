#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Sums what a callgrind run executed: instructions, and locked ones.

    count.py BINARY CALLGRIND_OUT ITERATIONS

The callgrind file must come from `--dump-instr=yes --compress-pos=no
--compress-strings=no`. A locked instruction is any `lock`-prefixed one or
an `xchg` with memory (an implicit lock), as `objdump -d` shows them in
BINARY (statically linked, so that libc's are counted too). Prints the
totals per iteration and the functions that execute them.
"""
import bisect
import collections
import signal
import subprocess
import sys


def locked_addresses(binary):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary],
                         capture_output=True, text=True, check=True).stdout
    addrs = set()
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0].strip().endswith(":"):
            continue
        ins = parts[1].strip()
        if ins.startswith("lock ") or (ins.startswith("xchg") and
                                       ins.replace(" ", "") != "xchg%ax,%ax"):
            addrs.add(int(parts[0].strip()[:-1], 16))
    return addrs


def symbols(binary):
    out = subprocess.run(["nm", "-n", "--defined-only", binary],
                         capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in "tTwWiI":
            syms.append((int(parts[0], 16), parts[2]))
    return syms


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    binary, profile, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
    locks = locked_addresses(binary)
    syms = symbols(binary)
    starts = [a for a, _ in syms]

    def function(addr):
        i = bisect.bisect_right(starts, addr) - 1
        return syms[i][1] if i >= 0 else "?"

    per_function = collections.Counter()
    locked = instructions = 0
    after_call = False
    with open(profile) as f:
        for line in f:
            line = line.strip()
            if line.startswith("calls="):
                after_call = True  # The next line is the call's inclusive cost.
                continue
            if not line.startswith("0x"):
                continue
            if after_call:
                after_call = False
                continue
            parts = line.split()
            addr, cost = int(parts[0], 16), int(parts[-1])
            instructions += cost
            if addr in locks:
                locked += cost
                per_function[function(addr)] += cost
    print("per iteration: %.0f instructions, %.2f locked" %
          (instructions / iterations, locked / iterations))
    for name, count in per_function.most_common():
        if count / iterations >= 0.05:
            print("%8.2f  %s" % (count / iterations, name))


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly.
    main()
