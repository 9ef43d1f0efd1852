#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Paired, interleaved timing of two builds of tools/atomics/loop.c.

The VM hipline is measured on changes speed between spells (a 4 KiB
malloc+free takes about 40 ns in one and 50 ns in the next), within a
run as well as between runs, so two builds timed one after the other
compare spells rather than code. This runs A and B alternately (ABBA...),
R rounds, and reports each one's median and the median of the per-round
ratios B/A, which cancels the spell a round ran in.

  python3 tools/atomics/ab.py LOOP_A LOOP_B [ROUNDS] [N] [pair|barrier]

LOOP_A and LOOP_B are static builds of the loop, as count-atomics.sh
links it:

  gcc -O2 -flto=auto -static -Iinclude tools/atomics/loop.c \
      build/lib/libhipline.a -lpthread -ldl -lm -o loop

Each run is a whole process (device creation included, spread over N
iterations; default N 200,000). HIPLINE_BACKEND is forced to host; other
variables (HIPLINE_ALLOCATOR, say) pass through.
"""
import os
import statistics
import subprocess
import sys
import time


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    a, b = argv[1], argv[2]
    rounds = int(argv[3]) if len(argv) > 3 else 24
    n = int(argv[4]) if len(argv) > 4 else 200000
    mode = argv[5] if len(argv) > 5 else "pair"
    env = dict(os.environ, HIPLINE_BACKEND="host")
    times = {a: [], b: []}
    ratios = []
    for r in range(rounds):
        this_round = {}
        for loop in ((a, b) if r % 2 == 0 else (b, a)):
            start = time.perf_counter_ns()
            subprocess.run([loop, mode, str(n)], env=env,
                           stdout=subprocess.DEVNULL, check=True)
            this_round[loop] = (time.perf_counter_ns() - start) / n
            times[loop].append(this_round[loop])
        ratios.append(this_round[b] / this_round[a])
    for name, loop in (("A", a), ("B", b)):
        xs = sorted(times[loop])
        print(f"{name} {loop}: median {statistics.median(xs):.1f} ns, "
              f"min {xs[0]:.1f} ns per {mode}")
    ratios.sort()
    q = len(ratios) // 4
    print(f"B/A per round: median {statistics.median(ratios):.3f} "
          f"(quartiles {ratios[q]:.3f}-{ratios[-1 - q]:.3f}, {rounds} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
