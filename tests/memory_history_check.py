# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks the snapshot memory_history_test writes (argv[1]): PyTorch's
layout, two allocs (64 KiB, then 32 KiB) and the free of the first on
device 0, and the second as the one live segment with one active_allocated
block at its address."""

import pickle
import sys


def fail(msg):
    print("memory_history_check: " + msg, file=sys.stderr)
    sys.exit(1)


def main(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    if set(snap) != {"segments", "device_traces"}:
        fail("keys %s" % sorted(snap))
    traces = snap["device_traces"]
    if len(traces) != 1:
        fail("%d device traces" % len(traces))
    events = [(e["action"], e["size"]) for e in traces[0]]
    if events != [("alloc", 65536), ("alloc", 32768),
                  ("free_completed", 65536)]:
        fail("events %s" % events)
    first, second, freed = traces[0]
    if freed["addr"] != first["addr"] or first["addr"] == second["addr"]:
        fail("addresses %r" % traces[0])
    if any(e["stream"] != 0 or e["frames"] != [] for e in traces[0]):
        fail("streams or frames %r" % traces[0])
    segments = snap["segments"]
    if len(segments) != 1:
        fail("%d segments" % len(segments))
    seg = segments[0]
    expected = {"device": 0, "address": second["addr"], "total_size": 32768,
                "allocated_size": 32768, "active_size": 32768,
                "requested_size": 32768, "stream": 0, "segment_type": "small",
                "frames": []}
    for key, value in expected.items():
        if seg.get(key) != value:
            fail("segment %s is %r, not %r" % (key, seg.get(key), value))
    if seg["blocks"] != [{"address": second["addr"], "size": 32768,
                          "requested_size": 32768,
                          "state": "active_allocated", "frames": []}]:
        fail("blocks %r" % seg["blocks"])
    print("snapshot ok")


if __name__ == "__main__":
    main(sys.argv[1])
