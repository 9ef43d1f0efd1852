# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""A short run of bench/serve against itself: every policy answers every
request correctly, nothing is lost, and both servers stop by themselves."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                    "..", ".."))
LOADGEN = os.path.join(ROOT, "bench", "serve", "loadgen.py")


class ServeTest(unittest.TestCase):
    def test_short_run_all_policies(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows_path = os.path.join(tmp, "rows.json")
            p = subprocess.run(
                [sys.executable, LOADGEN, "--clients", "4", "--duration", "1",
                 "--steps", "4", "--size", "4096", "--json", rows_path],
                capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(rows_path) as f:
                rows = json.load(f)
        self.assertEqual([r["policy"] for r in rows],
                         ["async", "ordered", "frontier", "device-sync"])
        for r in rows:
            self.assertGreater(r["requests"], 0, r)
            self.assertEqual((r["errors"], r["lost"], r["server_errors"],
                              r["server_exit"]), (0, 0, 0, 0), r)
            self.assertGreater(r["peak_reserved_bytes"], 0, r)
        by = {r["policy"]: r for r in rows}
        # The request's assume_no_alias decides the import of every step.
        self.assertGreater(by["async"]["async_imports"], 0)
        self.assertEqual(by["async"]["sync_imports"], 0)
        for name in ("ordered", "frontier", "device-sync"):
            self.assertEqual(by[name]["async_imports"], 0)
            self.assertGreater(by[name]["sync_imports"], 0)
            self.assertGreater(by[name]["fallback_releases"], 0)
        self.assertIn("| policy |", p.stdout)


if __name__ == "__main__":
    unittest.main()
