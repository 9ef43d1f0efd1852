# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Traces and memory history from Python (hipline.trace): the Chrome trace
JSON of a block and its PyTorch memory snapshot."""

import gc
import json
import os
import pickle
import tempfile
import time
import unittest

import hipline

KIB = 1024


class TraceTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.TemporaryDirectory()
        self.baseline = hipline.live_device_count()

    def tearDown(self):
        self.work.cleanup()
        gc.collect()
        self.assertEqual(hipline.live_device_count(), self.baseline)

    def path(self, name):
        return os.path.join(self.work.name, name)

    def test_trace_capture_of_a_block(self):
        out = self.path("run.json")
        with hipline.Device("host") as dev, dev.create_queue() as q:
            with hipline.trace_capture(out):
                self.assertTrue(hipline.trace_capture_active())
                buf = q.alloca(64 * KIB)
                q.fill(buf, 7, wait=buf.ready)
                q.dealloca(buf).wait(30)
                buf.close()
                self.assertGreater(
                    hipline.trace_capture_count("hl_queue_alloca.allocate"),
                    0)
            self.assertFalse(hipline.trace_capture_active())
        self.assertEqual(hipline.trace_capture_dropped(), 0)
        with open(out) as f:
            trace = json.load(f)
        names = {e.get("name") for e in trace["traceEvents"]}
        self.assertIn("hl_queue_alloca.allocate", names)
        # A second end writes nothing over it.
        hipline.trace_capture_end(out)
        with open(out) as f:
            self.assertEqual(json.load(f), trace)

    def test_memory_history_snapshot(self):
        out = self.path("run.pickle")
        with hipline.Device("host") as dev, dev.create_queue() as q:
            with hipline.memory_history(out):
                a = q.alloca(64 * KIB)
                b = q.alloca(32 * KIB)
                q.wait_idle(30)
                q.dealloca(a).wait(30)
                # The free is recorded once the pool has it back.
                deadline = time.monotonic() + 30
                while (dev.memory_stats().bytes_in_use != 32 * KIB and
                       time.monotonic() < deadline):
                    time.sleep(0.01)
            self.assertEqual(hipline.memory_history_dropped(), 0)
            q.dealloca(b).wait(30)
            for h in (a, b):
                h.close()
        with open(out, "rb") as f:
            snap = pickle.load(f)
        self.assertEqual(set(snap), {"segments", "device_traces"})
        (events,) = [t for t in snap["device_traces"] if t]
        self.assertEqual([(e["action"], e["size"]) for e in events],
                         [("alloc", 64 * KIB), ("alloc", 32 * KIB),
                          ("free_completed", 64 * KIB)])
        (segment,) = snap["segments"]
        self.assertEqual(segment["address"], events[1]["addr"])
        self.assertEqual(segment["total_size"], 32 * KIB)

    def test_bad_paths_and_arguments(self):
        hipline.trace_capture_begin()
        with self.assertRaises(hipline.PermissionDeniedError) as cm:
            hipline.trace_capture_end("/nonexistent-dir/x.json")
        self.assertIn("/nonexistent-dir/x.json", str(cm.exception))
        hipline.memory_history_begin(16)
        with self.assertRaises(hipline.PermissionDeniedError):
            hipline.memory_history_end("/nonexistent-dir/x.pickle")
        with self.assertRaises(TypeError):
            hipline.trace_capture_end(5)
        with self.assertRaises(hipline.InvalidArgumentError):
            hipline.trace_capture_end("a\0b")
        with self.assertRaises(hipline.OutOfRangeError):
            hipline.memory_history_begin(-1)
        # Discarding, and ending with nothing to end, are fine.
        hipline.memory_history_begin()
        hipline.memory_history_end(None)
        hipline.memory_history_end(self.path("none.pickle"))
        self.assertFalse(os.path.exists(self.path("none.pickle")))


if __name__ == "__main__":
    unittest.main()
