# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The package's type hints satisfy a checker: mypy --strict (the settings
in pyproject.toml) over the package and tests/typing_client.py, client
code whose deliberate mistakes the hints must catch; and mypy over the
Python examples.

Runs with an interpreter that has mypy (Debian: mypy, for /usr/bin/python3;
tools/test.sh installs it); without one it fails naming the package.
"""

import importlib.util
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)


class TypeCheckTest(unittest.TestCase):
    def test_mypy_strict(self):
        if importlib.util.find_spec("mypy") is None:
            self.fail("mypy is not installed for %s (Debian: apt-get install "
                      "mypy)" % sys.executable)
        result = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file",
             os.path.join(PACKAGE_ROOT, "pyproject.toml"),
             "--cache-dir", os.devnull, "hipline",
             os.path.join("tests", "typing_client.py")],
            cwd=PACKAGE_ROOT, capture_output=True, text=True)
        self.assertEqual(result.returncode, 0,
                         "mypy failed:\n" + result.stdout + result.stderr)
        self.assertIn("Success", result.stdout)

    def test_mypy_examples(self):
        """The Python examples use the API as its hints say (their bodies
        checked, though they carry few hints themselves)."""
        if importlib.util.find_spec("mypy") is None:
            self.fail("mypy is not installed for %s (Debian: apt-get install "
                      "mypy)" % sys.executable)
        examples = os.path.join(PACKAGE_ROOT, "..", "..", "..", "examples",
                                "python")
        scripts = sorted(os.path.join(examples, name)
                         for name in os.listdir(examples)
                         if name.endswith(".py"))
        self.assertTrue(scripts)
        result = subprocess.run(
            [sys.executable, "-m", "mypy", "--python-version", "3.9",
             "--check-untyped-defs", "--warn-unused-ignores", "--cache-dir",
             os.devnull] + scripts,
            env=dict(os.environ, MYPYPATH=PACKAGE_ROOT), cwd=examples,
            capture_output=True, text=True)
        self.assertEqual(result.returncode, 0,
                         "mypy failed:\n" + result.stdout + result.stderr)


if __name__ == "__main__":
    unittest.main()
