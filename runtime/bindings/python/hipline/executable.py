# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Executables made from the program's own code objects (docs/executables.md).

    exe = hipline.Executable({
        "gfx90a": "build/kernels_gfx90a.co",        # a path...
        "gfx1100": open("kernels_gfx1100.co", "rb").read(),  # ...or bytes
        "host": "build/kernels_host.so",            # the host backend's twin
    })
    queue.dispatch("vector_add", [hipline.BufferArg(a, "r"),
                                  hipline.BufferArg(b, "r"),
                                  hipline.BufferArg(c, "w"),
                                  hipline.Scalar.u32(n)],
                   grid=(n // 256,), block=(256,), executable=exe)

Each device runs the object whose target matches its own (the target-id
rules of hl_executable_match_target), loaded on its first dispatch.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import byref, c_size_t, c_void_p
from typing import Any, List, Mapping, Optional, Tuple, Union

from . import _lib
from ._args import _handle_arg, _str_arg
from ._handle import _call, _ccall, _check_not_forked, _Handle
from ._lib import lib
from .device import Device
from .errors import StatusCode, _check, _make_error

__all__ = ["Executable"]

# One code object: a path (str or os.PathLike) or its bytes (any
# buffer-protocol object: bytes, bytearray, memoryview, mmap...).
_CodeObject = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]

_HOST = "host"


def _object_bytes(value: Any, what: str) -> bytes:
    try:
        return memoryview(value).cast("B").tobytes()
    except TypeError:
        raise TypeError("%s must be a path (str, os.PathLike) or bytes, not "
                        "%s" % (what, type(value).__name__)) from None


def _host_file(data: bytes) -> Tuple[int, bytes]:
    """An anonymous file holding |data| (a host shared object given as
    bytes): its descriptor and a path dlopen can open."""
    if not data:
        raise _make_error(StatusCode.INVALID_ARGUMENT,
                          "the host code object's bytes are empty")
    fd = os.memfd_create("hipline-host-code-object", 0)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        raise
    return fd, os.fsencode("/proc/self/fd/%d" % fd)


class Executable(_Handle):
    """An executable made from code objects keyed by target id.

    Executable({target: object, ...}): each |object| is a path or the
    object's bytes; |target| is its target id ("gfx90a",
    "gfx90a:xnack-", "host"), or None for an offload bundle whose every
    AMDGPU entry is taken with its own target. GPU objects are AMDGPU ELF
    files or clang offload bundles; the "host" object is a shared object
    under the host kernel ABI (hipline/executable.h), given as a path or
    as bytes (then loaded from an anonymous in-memory file). Every object
    is read and its kernel signatures parsed now; nothing is loaded on a
    device until a device dispatches from it. Malformed objects raise
    InvalidArgumentError naming the object; unreadable files or shared
    objects that do not load raise UnavailableError.

    Dispatch a kernel with Queue.dispatch(kernel, args, ...,
    executable=exe).
    """

    _release = lib.hl_executable_release
    _kind = "Executable"

    def __init__(self,
                 objects: Mapping[Optional[str], _CodeObject]) -> None:
        _check_not_forked()
        if not isinstance(objects, Mapping):
            raise TypeError("objects must be a mapping of target id to a "
                            "path or bytes, not %s" % type(objects).__name__)
        if not objects:
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "an executable needs at least one code object")
        entries = (_lib.code_object_t * len(objects))()
        keep: List[Any] = []  # The bytes C reads during the call.
        fds: List[int] = []
        try:
            for i, (target, value) in enumerate(objects.items()):
                self._fill(entries[i], target, value, keep, fds)
            out = c_void_p()
            _check(lib.hl_executable_create(len(objects), entries,
                                            byref(out)))
        finally:
            for fd in fds:
                os.close(fd)  # dlopen keeps its own mapping.
        super().__init__(out.value)

    @staticmethod
    def _fill(entry: Any, target: Optional[str], value: Any, keep: List[Any],
              fds: List[int]) -> None:
        what = "objects[%r]" % (target,)
        ctarget = None if target is None else _str_arg(target, "target")
        entry.target = ctarget
        keep.append(ctarget)
        if isinstance(value, (str, os.PathLike)):
            path = os.fsencode(value)
            if b"\0" in path:
                raise _make_error(StatusCode.INVALID_ARGUMENT,
                                  "%s: the path contains a NUL" % what)
            entry.path = path
            keep.append(path)
            return
        data = _object_bytes(value, what)
        if target is not None and target == _HOST:
            fd, path = _host_file(data)
            fds.append(fd)
            entry.path = path
            keep.append(path)
            return
        entry.data = ctypes.cast(ctypes.c_char_p(data), c_void_p).value
        entry.size = len(data)
        keep.append(data)

    def _describe(self) -> str:
        targets = self.targets
        return "%d object%s: %s" % (len(targets),
                                    "" if len(targets) == 1 else "s",
                                    ", ".join(targets))

    @property
    def targets(self) -> List[str]:
        """The canonical target ids of the executable's code objects (an
        offload bundle contributes one per entry taken), in order."""
        with self._use() as p:
            return [(lib.hl_executable_object_target(p, i) or b"").decode()
                    for i in range(lib.hl_executable_object_count(p))]

    def _select(self, device: Device) -> int:
        _handle_arg(device, Device, "device")
        index = c_size_t()
        _ccall(lib.hl_executable_select_for_device, self, device,
               byref(index))
        return index.value

    def select(self, device: Device) -> str:
        """The target of the object |device| runs (chosen, not loaded).
        NotFoundError lists the targets offered and the device's when no
        object is compatible."""
        index = self._select(device)
        with self._use() as p:
            return (lib.hl_executable_object_target(p, index) or b"").decode()

    def kernel_arg_count(self, kernel: str, device: Device) -> int:
        """The number of explicit arguments of |kernel| in the object
        |device| runs (hidden arguments are the runtime's). NotFoundError
        names the kernel and lists the object's kernels."""
        index = self._select(device)
        count = c_size_t()
        _ccall(lib.hl_executable_kernel_arg_count, self, index,
               _str_arg(kernel, "kernel"), byref(count))
        return count.value

    def __len__(self) -> int:
        return int(_call(lib.hl_executable_object_count, self))
