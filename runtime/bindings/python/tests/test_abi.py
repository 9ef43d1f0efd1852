# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The ctypes declarations match the C structs they mirror.

HL_ABI_LAYOUT names a program (tests/python_abi_layout.c) that prints the
size of every mirrored struct and the offset of the fields that move when
one before them changes.
"""
import ctypes
import os
import subprocess
import unittest

from hipline import _lib


class AbiLayoutTest(unittest.TestCase):
    def test_structs_match_c(self):
        program = os.environ.get("HL_ABI_LAYOUT")
        if not program:
            self.skipTest("HL_ABI_LAYOUT is not set")
        out = subprocess.run([program], check=True, capture_output=True,
                             text=True).stdout
        checked = 0
        for line in out.splitlines():
            name, what, value = line.split()
            struct, _, field = name.partition(".")
            cls = getattr(_lib, struct[len("hl_"):])
            if what == "size":
                got = ctypes.sizeof(cls)
            else:
                got = getattr(cls, field).offset
            self.assertEqual(got, int(value), "%s %s" % (name, what))
            checked += 1
        self.assertGreater(checked, 10)


if __name__ == "__main__":
    unittest.main()
