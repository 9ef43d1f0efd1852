# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Prints where a Python interpreter looks for packages under a prefix.

Usage: python3 python_site.py PREFIX

Run by `cmake --install` (cmake/install_python.cmake) with the interpreter
the build was configured for, or with PREFIX/bin/python when PREFIX is a
virtual environment. Prints two lines: the package directory relative to
PREFIX, and `on-path` when the interpreter imports from it without
PYTHONPATH (`off-path` otherwise).
"""

import os
import site
import sys
import sysconfig


def candidates():
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs.extend(p for p in sys.path if p)
    return dirs


def main(prefix):
    prefix = os.path.realpath(prefix)
    found = []
    for path in candidates():
        real = os.path.realpath(path)
        if (os.path.basename(real) in ("site-packages", "dist-packages") and
                real.startswith(prefix + os.sep)):
            found.append(os.path.relpath(real, prefix))
    if found:
        # The nearest one: for /usr, Debian's lib/python3/dist-packages
        # rather than local/lib/python3.X/dist-packages.
        print(min(found, key=lambda rel: rel.count(os.sep)))
        print("on-path")
        return 0
    purelib = sysconfig.get_path(
        "purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
    print(os.path.relpath(purelib, prefix))
    print("off-path")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python_site.py PREFIX\n")
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
