# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Prints the table of tools/gpu/cuda-bridge.sh's bench step.

Reads, from the directory given, what the step wrote: the JSON of
hipline-stress (multistream, five serving runs) and of
hipline-bench-command-buffer, and the HIP call counts
(HL_HIP_TEST_RUNTIME_CALL_COUNTS files) at two run lengths each, whose
difference divided by the operations between them is the calls per
operation (event creates and destroys left out: the event pool grows with
how far the device falls behind, not with the operation).
"""

import json
import os
import statistics
import sys


def load_json(path):
    with open(path) as f:
        data = json.load(f)
    return data[0] if isinstance(data, list) else data


def load_counts(path):
    counts = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, _total, caller, runtime = line.split()
            counts[name] = (int(caller), int(runtime))
    return counts


def per_op(directory, tag, short, long, ops):
    a = load_counts(os.path.join(directory, f"calls-{tag}-{short}.txt"))
    b = load_counts(os.path.join(directory, f"calls-{tag}-{long}.txt"))
    caller = runtime = 0
    for name, (c, r) in b.items():
        if name in ("hipEventCreateWithFlags", "hipEventDestroy"):
            continue
        c0, r0 = a.get(name, (0, 0))
        caller += c - c0
        runtime += r - r0
    return caller / ops, runtime / ops


def runtime_calls(path):
    """hipline's threads' calls in one counted run, event churn left out."""
    return sum(r for name, (_c, r) in load_counts(path).items()
               if name not in ("hipEventCreateWithFlags", "hipEventDestroy"))


def mode_rows(directory, mode):
    """Multistream and serving under HIPLINE_COMPLETER=|mode|."""
    rows = []
    ms = load_json(os.path.join(directory, f"ms-{mode}.json"))
    # multistream: 4 queues and then 1, per iteration: 5 queue-iterations.
    c, r = per_op(directory, f"ms-{mode}", 200, 400, 200 * 5)
    rows.append((f"[{mode}] multistream 4/1 (time ratio)",
                 f"{ms['queue_scaling']:.2f}x",
                 f"{c:.2f} / {r:.2f} per queue-iteration"))
    rows.append((f"[{mode}] multistream p50 submit",
                 f"{ms['p50_us']:.1f} us", ""))
    rates = [load_json(os.path.join(directory, f"sv-{mode}-{i}.json"))
             ["ops_per_s"] for i in range(1, 6)]
    median = statistics.median(rates)
    spread = max(abs(x - median) / median for x in rates) * 100
    c, r = per_op(directory, f"sv-{mode}", 20, 40, 20 * 8)
    rows.append((f"[{mode}] serving ops/s (median of 5)", f"{median:.0f}",
                 f"{c:.2f} / {r:.2f} per request-step"))
    rows.append((f"[{mode}] serving runs", " ".join(f"{x:.0f}" for x in rates),
                 f"max {spread:.0f}% from the median"))
    # 40 iterations of 8 requests: 320 request-steps per counted run.
    done = sorted(runtime_calls(os.path.join(
        directory, f"calls-svrun-{mode}-{i}.txt")) / 320 for i in range(1, 6))
    rows.append((f"[{mode}] serving, hipline's calls per request-step", "",
                 f"min {done[0]:.3f} / median {done[2]:.3f} / "
                 f"max {done[4]:.3f} over 5 runs"))
    return rows


def main():
    directory = sys.argv[1]
    rows = []
    for mode in ("poll", "block"):
        rows += mode_rows(directory, mode)
    cb = load_json(os.path.join(directory, "cb.json"))
    c, r = per_op(directory, "cb", 100, 200, 5 * 100)
    rows.append(("command buffer, 8 ops: one by one",
                 f"{cb['one_by_one_ns_per_op'] * 8 / 1000:.1f} us", ""))
    rows.append(("command buffer, 8 ops: one execution",
                 f"{cb['execute_ns_per_op'] * 8 / 1000:.1f} us",
                 f"{c:.2f} / {r:.2f} per execution"))
    width = max(len(row[0]) for row in rows)
    print(f"{'hip backend':<{width}}  {'value':>14}  "
          "HIP calls (submitter / hipline's threads)")
    for name, value, calls in rows:
        print(f"{name:<{width}}  {value:>14}  {calls}")


if __name__ == "__main__":
    main()
