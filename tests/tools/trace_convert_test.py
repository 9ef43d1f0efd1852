#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Tests for tools/hipline-trace-convert.

Usage: trace_convert_test.py CONVERTER CHECKER TESTDATA_DIR

CHECKER is replay_log_test; its --check-csv mode parses a CSV with the C
parser and prints `allocs=N frees=N peak_live_bytes=N ...`.
"""

import gzip
import json
import os
import pickle
import re
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

CONVERTER = None
CHECKER = None
TESTDATA = None


class Evil:
    """Pickles as a call to os.system that would create |marker|."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def snapshot_event(action, addr, size, time_us, stream=0):
    return {"action": action, "addr": addr, "size": size, "stream": stream,
            "time_us": time_us, "frames": [], "compile_context": "N/A"}


def summary_fields(text):
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text)}


class TraceConvertTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="trace-convert-test-")
        self.tmp = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write(self, name, data):
        with open(self.path(name), "wb") as f:
            f.write(data)
        return self.path(name)

    def convert(self, input_path, output_name="out.csv", *extra):
        output = self.path(output_name)
        result = subprocess.run(
            [sys.executable, CONVERTER, input_path, "-o", output, *extra],
            capture_output=True, text=True, timeout=60)
        return result, output

    def convert_ok(self, input_path, *extra):
        result, output = self.convert(input_path, "out.csv", *extra)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(output, encoding="ascii") as f:
            return f.read(), summary_fields(result.stderr)

    def check_with_c_parser(self, csv_path):
        result = subprocess.run([CHECKER, "--check-csv", csv_path],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return summary_fields(result.stdout)

    def assert_refused(self, result, output, marker, pattern):
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, pattern)
        self.assertNotIn("Traceback", result.stderr)
        self.assertFalse(os.path.exists(marker), "the pickle ran os.system")
        self.assertFalse(os.path.exists(output), "a CSV was written")

    def test_snapshot(self):
        snapshot = {
            "segments": [],
            "device_traces": [[
                snapshot_event("segment_alloc", 0x1000, 1 << 20, 1000),
                snapshot_event("alloc", 0x1000, 512, 1007, stream=0xabc),
                snapshot_event("alloc", 0x1200, 256, 1010),
                snapshot_event("free_requested", 0x1000, 512, 1020, 0xabc),
                snapshot_event("alloc", 0x1400, 64, 1025),
                snapshot_event("free_completed", 0x1000, 512, 1030, 0xabc),
                snapshot_event("oom", 0, 1 << 40, 1040),
                snapshot_event("free_requested", 0x1200, 256, 3600001007),
                snapshot_event("free_completed", 0x1200, 256, 3600001007),
                # Requested but never completed: still live at the end.
                snapshot_event("free_requested", 0x1400, 64, 3600001008),
                snapshot_event("segment_free", 0x1000, 1 << 20, 3600001009),
            ]],
        }
        for protocol in (2, 4, pickle.HIGHEST_PROTOCOL):
            path = self.write("snap.pickle",
                              pickle.dumps(snapshot, protocol=protocol))
            text, summary = self.convert_ok(path)
            self.assertEqual(text, (
                "Thread,Time,Action,Pointer,Size,Stream\n"
                "0,0:00:00.000000,allocate,0x1000,512,0xabc\n"
                "0,0:00:00.000003,allocate,0x1200,256,0\n"
                "0,0:00:00.000018,allocate,0x1400,64,0\n"
                "0,0:00:00.000023,free,0x1000,512,0xabc\n"
                "0,0:00:00.000033,allocate failure,(nil),1099511627776,0\n"
                "0,1:00:00.000000,free,0x1200,256,0\n"))
            self.assertEqual(summary["allocs"], 3)
            self.assertEqual(summary["frees"], 2)
            self.assertEqual(summary["failures"], 1)
            self.assertEqual(summary["peak_live_bytes"], 832)
            self.assertEqual(summary["never_freed"], 1)
            parsed = self.check_with_c_parser(self.path("out.csv"))
            self.assertEqual(parsed["allocs"], 3)
            self.assertEqual(parsed["peak_live_bytes"], 832)

    def test_snapshot_gzip_and_device_filter(self):
        snapshot = {"segments": [], "device_traces": [
            [snapshot_event("alloc", 0x10, 8, 5)],
            [snapshot_event("alloc", 0x20, 16, 1),
             snapshot_event("free_completed", 0x20, 16, 2)],
        ]}
        path = self.write("snap.pickle.gz", gzip.compress(pickle.dumps(snapshot)))
        _, summary = self.convert_ok(path)
        self.assertEqual(summary["allocs"], 2)
        self.assertEqual(summary["peak_live_bytes"], 16)
        _, summary = self.convert_ok(path, "--device", "0")
        self.assertEqual(summary["allocs"], 1)
        self.assertEqual(summary["peak_live_bytes"], 8)

    def test_kineto_json_and_gzip(self):
        source = os.path.join(TESTDATA, "kineto-sample.json")
        with open(os.path.join(TESTDATA, "kineto-sample.expected.csv")) as f:
            expected = f.read()
        with open(source, "rb") as f:
            data = f.read()
        for path in (source, self.write("k.json.gz", gzip.compress(data))):
            text, summary = self.convert_ok(path)
            self.assertEqual(text, expected)
            self.assertEqual(summary["allocs"], 3)
            self.assertEqual(summary["frees"], 2)
            self.assertEqual(summary["peak_live_bytes"], 3072)
            parsed = self.check_with_c_parser(self.path("out.csv"))
            self.assertEqual(parsed["allocs"], 3)
            self.assertEqual(parsed["frees"], 2)
            self.assertEqual(parsed["peak_live_bytes"], 3072)

    def test_rmm_sample_parses(self):
        parsed = self.check_with_c_parser(os.path.join(TESTDATA,
                                                       "rmm-sample.csv"))
        self.assertEqual(parsed["allocs"], 4)
        self.assertEqual(parsed["frees"], 3)
        self.assertEqual(parsed["peak_live_bytes"], 4194304 + 1048576 + 256)
        self.assertEqual(parsed["never_freed"], 1)
        self.assertEqual(parsed["streams"], 2)
        self.assertEqual(parsed["threads"], 2)

    def test_malicious_pickle_is_refused(self):
        marker = self.path("pwned")
        for protocol in (2, 3, 4, 5):
            path = self.write("evil.pickle",
                              pickle.dumps(Evil(marker), protocol=protocol))
            result, output = self.convert(path)
            self.assert_refused(result, output, marker,
                                r"refusing to load the pickled global "
                                r"(posix|os)\.system")

    def test_malicious_pickle_inside_snapshot_is_refused(self):
        marker = self.path("pwned")
        event = snapshot_event("alloc", 0x10, 8, 5)
        event["frames"] = [Evil(marker)]
        snapshot = {"segments": [], "device_traces": [[event]]}
        path = self.write("evil.pickle.gz", gzip.compress(pickle.dumps(snapshot)))
        result, output = self.convert(path)
        self.assert_refused(result, output, marker, r"refusing")

    def test_protocol_0_pickle_is_refused(self):
        marker = self.path("pwned")
        path = self.write("evil0.pickle", pickle.dumps(Evil(marker), protocol=0))
        result, output = self.convert(path)
        self.assert_refused(result, output, marker, r"not a PyTorch memory")

    def test_other_classes_are_refused(self):
        marker = self.path("pwned")
        snapshot = {"device_traces": [[snapshot_event("alloc", 1, 1, 1)]],
                    "when": __import__("datetime").datetime(2024, 1, 1)}
        path = self.write("dt.pickle", pickle.dumps(snapshot, protocol=4))
        result, output = self.convert(path)
        self.assert_refused(result, output, marker, r"datetime\.datetime")

    def test_bad_inputs(self):
        cases = [
            (b"", r"not a PyTorch memory snapshot pickle"),
            (b"\x00\x01garbage", r"not a PyTorch memory snapshot pickle"),
            (b"\x1f\x8b\x08\x00broken", r"bad gzip data|error"),
            (b"{\"traceEvents\": [", r"bad JSON"),
            (b"{\"traceEvents\": []}", r"no device \[memory\] events"),
            (b"{}", r"no 'traceEvents' list"),
            (b"\x80\x04\x95", r"bad pickle"),
            (pickle.dumps({"segments": []}), r"not a memory snapshot"),
            (pickle.dumps([1, 2]), r"not a memory snapshot"),
            (pickle.dumps({"device_traces": [[]]}), r"no allocation events"),
            (pickle.dumps({"device_traces": [[
                snapshot_event("alloc", -5, 8, 1)]]}), r"'addr' is -5"),
            (pickle.dumps({"device_traces": [[
                snapshot_event("alloc", 16, 8, 1),
                snapshot_event("alloc", 16, 8, 2)]]}),
             r"0x10 is allocated twice"),
            (json.dumps({"traceEvents": [{"name": "[memory]", "ts": 1,
                                          "args": {"Addr": 1, "Bytes": "x"}}]
                         }).encode(), r"'Bytes' is 'x'"),
        ]
        for data, pattern in cases:
            with self.subTest(data=data[:40]):
                path = self.write("bad.bin", data)
                result, output = self.convert(path)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertRegex(result.stderr,
                                 r"hipline-trace-convert: error: .*" + pattern)
                self.assertNotIn("Traceback", result.stderr)
                self.assertFalse(os.path.exists(output))
        result, _ = self.convert(self.path("does-not-exist"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("No such file", result.stderr)
        result = subprocess.run([sys.executable, CONVERTER, "x"],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 2)


    def assert_one_line_error(self, path, pattern):
        result, output = self.convert(path)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertRegex(lines[0], r"hipline-trace-convert: error: .*" + pattern)
        self.assertFalse(os.path.exists(output))

    def test_non_finite_and_list_values(self):
        memory = {"name": "[memory]", "ts": 1, "tid": 1,
                  "args": {"Addr": 16, "Bytes": 8, "Device Type": 1}}
        cases = [
            (b'{"traceEvents":[{"name":"[memory]","ts":Infinity,'
             b'"args":{"Addr":16,"Bytes":8}}]}', r"'ts' is inf"),
            (b'{"traceEvents":[{"name":"[memory]","ts":1e400,'
             b'"args":{"Addr":16,"Bytes":8}}]}', r"'ts' is inf"),
            (b'{"traceEvents":[{"name":"[memory]","ts":NaN,'
             b'"args":{"Addr":16,"Bytes":8}}]}', r"'ts' is nan"),
        ]
        for key, where in (("ts", None), ("tid", None), ("Addr", "args"),
                           ("Bytes", "args"), ("Device Type", "args")):
            entry = json.loads(json.dumps(memory))
            (entry[where] if where else entry)[key] = [1]
            cases.append((json.dumps({"traceEvents": [entry]}).encode(),
                          r"'(args\.)?%s' is \[1\]" % key))
        cases.append((pickle.dumps({"device_traces": [[snapshot_event(
            "alloc", 16, 8, float("inf"))]]}), r"'time_us' is inf"))
        for key in ("action", "addr", "size", "stream", "time_us"):
            event = snapshot_event("alloc", 16, 8, 1)
            event[key] = [1]
            cases.append((pickle.dumps({"device_traces": [[event]]}),
                          r"'%s' is \[1\]" % key))
        for data, pattern in cases:
            with self.subTest(data=data[:60]):
                self.assert_one_line_error(self.write("bad.bin", data),
                                           pattern)

    def test_oversized_pickle_opcodes(self):
        # BINBYTES8, BINUNICODE8, FRAME, BYTEARRAY8 with lengths far beyond
        # the data.
        for opcode in (b"\x8e", b"\x8d", b"\x95", b"\x96"):
            for length in ((1 << 63) - 5, 1 << 40):
                with self.subTest(opcode=opcode, length=length):
                    data = b"\x80\x05" + opcode + struct.pack("<Q", length)
                    self.assert_one_line_error(
                        self.write("big.pickle", data + b"abc"), r"bad pickle")

    def test_gzip_bomb_is_bounded(self):
        # 2 MB of gzip holding 2 GiB of zeros: refused from its first bytes.
        path = self.path("zeros.gz")
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)
        with open(path, "wb") as f:
            for _ in range(2048):
                f.write(comp.compress(bytes(1 << 20)))
            f.write(comp.flush())
        # The converter's memory is capped (256 MiB of address space beyond
        # the interpreter's): the old gzip.decompress needed 2 GiB and more.
        limit = 1 << 30
        result = subprocess.run(
            [sys.executable, CONVERTER, path, "-o", self.path("out.csv")],
            capture_output=True, text=True, timeout=120,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS,
                                                  (limit, limit)))
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertIn("is not a PyTorch memory snapshot", result.stderr)
        # JSON that decompresses beyond --max-bytes is refused at the limit.
        path = self.path("spaces.json.gz")
        with gzip.open(path, "wb") as f:
            f.write(b'{"traceEvents": [' + b" " * (4 << 20) + b"]}")
        result, _ = self.convert(path, "out.csv", "--max-bytes", "1000000")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("more than 1000000 bytes", result.stderr)
        # Concatenated gzip members still convert.
        events = {"traceEvents": [
            {"name": "[memory]", "ts": 1, "tid": 1,
             "args": {"Addr": 16, "Bytes": 8, "Device Type": 1}}]}
        text = json.dumps(events).encode()
        path = self.write("two.json.gz", gzip.compress(text[:10]) +
                          gzip.compress(text[10:]))
        self.convert_ok(path)

    def test_plain_input_is_bounded(self):
        # An endless input that is not a trace is refused from its first
        # bytes (it used to be read whole: /dev/zero grew to GBs).
        limit = 1 << 30
        result = subprocess.run(
            [sys.executable, CONVERTER, "/dev/zero", "-o",
             self.path("out.csv")],
            capture_output=True, text=True, timeout=120,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS,
                                                  (limit, limit)))
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertIn("not a PyTorch memory snapshot", result.stderr)
        self.assertFalse(os.path.exists(self.path("out.csv")))
        # Plain JSON beyond --max-bytes is refused at the limit.
        path = self.write("spaces.json",
                          b'{"traceEvents": [' + b" " * (4 << 20) + b"]}")
        result, _ = self.convert(path, "out.csv", "--max-bytes", "1000000")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("more than 1000000 bytes", result.stderr)

    def test_sigterm_removes_partial_output(self):
        # A FIFO input blocks the converter in its read; SIGTERM then ends
        # it with 143 and no output.
        fifo = self.path("input.fifo")
        os.mkfifo(fifo)
        output = self.path("out.csv")
        proc = subprocess.Popen([sys.executable, CONVERTER, fifo, "-o", output],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        with open(fifo, "wb") as writer:
            writer.write(b'{"traceEvents": [')
            writer.flush()
            # The reader has the fifo open; wait for its handler (SigCgt).
            want = 1 << (signal.SIGTERM - 1)
            for _ in range(12000):
                with open("/proc/%d/status" % proc.pid) as f:
                    caught = [int(l.split()[1], 16) for l in f
                              if l.startswith("SigCgt:")]
                if caught and caught[0] & want:
                    break
                time.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 143, stderr)
        self.assertNotIn("Traceback", stderr)
        self.assertFalse(os.path.exists(output))


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit("usage: trace_convert_test.py CONVERTER CHECKER TESTDATA_DIR")
    CONVERTER, CHECKER, TESTDATA = sys.argv[1:4]
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:], verbosity=2)
