#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Every source file of hipline names its licence in an SPDX line.

  check_spdx.py ROOT          lists the files without one; exit 1 if any
  check_spdx.py ROOT --fix    adds the line where it is missing

Source files: C, C++ and HIP sources and headers, Python, shell, CMake,
configure templates (*.in), pyproject.toml, sanitizer suppressions, and
scripts with a #! line, under the folders below (build trees and hidden
folders are skipped). The line goes first, or second after a #! line, in
the file's comment syntax. A file's leading comment stays a comment, so
examples/readme_check.cmake (which drops leading comment lines) still
matches the README's quoted programs.
"""
import os
import sys

TAG = "SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception"
FOLDERS = ("bench", "cmake", "examples", "fuzz", "include", "kernels",
           "runtime", "tests", "tools")
TOP_FILES = ("CMakeLists.txt",)
SLASH = {".c", ".h", ".hip", ".cpp", ".cc", ".hpp"}
HASH = {".py", ".sh", ".cmake", ".in", ".toml", ".supp"}
SKIP_DIRS = {"__pycache__", "node_modules"}


def comment_for(path, first_line):
    base = os.path.basename(path)
    ext = os.path.splitext(base)[1]
    if ext in SLASH:
        return "// "
    if ext in HASH or base == "CMakeLists.txt":
        return "# "
    if not ext and first_line.startswith("#!"):
        return "# "
    return None


def sources(root):
    for name in TOP_FILES:
        path = os.path.join(root, name)
        if os.path.isfile(path):
            yield path
    for folder in FOLDERS:
        top = os.path.join(root, folder)
        for d, dirs, files in os.walk(top):
            dirs[:] = sorted(x for x in dirs
                             if not x.startswith((".", "build"))
                             and x not in SKIP_DIRS
                             and not x.endswith(".egg-info"))
            for f in sorted(files):
                path = os.path.join(d, f)
                if not os.path.islink(path):
                    yield path


def check(path, fix):
    """Returns True when |path| is fine (or was fixed)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (UnicodeDecodeError, OSError):
        return True  # Not text: not a source file.
    lines = text.splitlines(keepends=True)
    prefix = comment_for(path, lines[0] if lines else "")
    if prefix is None:
        return True
    head = lines[:2] if lines and lines[0].startswith("#!") else lines[:1]
    if any(TAG in line for line in head):
        return True
    if not fix:
        return False
    at = 1 if lines and lines[0].startswith("#!") else 0
    lines.insert(at, prefix + TAG + "\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(lines))
    return True


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    root, fix = argv[1], "--fix" in argv[2:]
    missing = [p for p in sources(root) if not check(p, fix)]
    for p in missing:
        print(f"{os.path.relpath(p, root)}: no '{TAG}' line at the top")
    if missing:
        print(f"check_spdx: {len(missing)} file(s) without an SPDX line; "
              f"'{argv[0]} {root} --fix' adds them")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
