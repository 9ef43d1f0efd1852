# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Builds the hipline wheel: the ctypes package plus libhipline.so.

The library comes from $LIBHIPLINE when it is set (a built libhipline.so*,
e.g. build/lib/libhipline.so.0); otherwise CMake builds the target
hipline_shared from this source tree (tests, tools and GPU code objects
off) into the build directory. Either way it lands in the package as
libhipline.so.<major>, with an _install_paths.py that points the loader
(_lib.py) at it.
"""

import os
import re
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
EXPORT_H = os.path.join(SOURCE_ROOT, "include", "hipline", "export.h")


def read_version():
    with open(EXPORT_H, encoding="utf-8") as f:
        text = f.read()
    parts = [re.search(r"#define HIPLINE_VERSION_%s (\d+)" % name, text)
             for name in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise RuntimeError("no HIPLINE_VERSION_* in %s" % EXPORT_H)
    return ".".join(m.group(1) for m in parts)


VERSION = read_version()
LIBRARY_NAME = "libhipline.so.%s" % VERSION.split(".")[0]


def build_library(build_temp):
    """Builds libhipline.so with CMake; returns its path."""
    if not shutil.which("cmake"):
        raise RuntimeError(
            "hipline: set LIBHIPLINE to a built libhipline.so, or install "
            "cmake and a C compiler so that it can be built")
    build_dir = os.path.join(os.path.abspath(build_temp), "cmake")
    subprocess.check_call([
        "cmake", "-S", SOURCE_ROOT, "-B", build_dir,
        "-DCMAKE_BUILD_TYPE=Release", "-DHIPLINE_BUILD_TESTS=OFF",
        "-DHIPLINE_BUILD_TOOLS=OFF", "-DHIPLINE_INSTALL=OFF",
        "-DHIPLINE_KERNEL_CLANG=OFF", "-DHIPLINE_HIPCC=OFF"])
    subprocess.check_call([
        "cmake", "--build", build_dir, "--target", "hipline_shared",
        "-j", os.environ.get("HIPLINE_JOBS", "2")])
    return os.path.join(build_dir, "lib", LIBRARY_NAME)


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        source = os.environ.get("LIBHIPLINE")
        if source:
            if not os.path.isfile(source):
                raise RuntimeError("hipline: LIBHIPLINE=%s is not a file"
                                   % source)
        else:
            build_temp = self.get_finalized_command("build").build_temp
            source = build_library(build_temp)
        package_dir = os.path.join(self.build_lib, "hipline")
        # Always copied: build_py's copy_file skips a destination newer
        # than the source, which an earlier build from this tree (another
        # preset's library) can leave in build/.
        shutil.copy2(source, os.path.join(package_dir, LIBRARY_NAME))
        with open(os.path.join(package_dir, "_install_paths.py"), "w",
                  encoding="utf-8") as f:
            f.write("# Written by setup.py: libhipline.so is in this "
                    "package.\n")
            f.write('LIBRARY_DIR = "."\n')
            f.write('LIBRARY_NAME = "%s"\n' % LIBRARY_NAME)


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(version=VERSION, cmdclass={"build_py": BuildPyWithLibrary},
      distclass=BinaryDistribution)
