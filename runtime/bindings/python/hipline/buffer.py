# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Buffers (views of allocations) and the arguments of a dispatch."""

from __future__ import annotations

import ctypes
import struct
from ctypes import byref, c_void_p
from typing import Optional, Union

from ._args import U32_MAX, _ACCESS, _enum_arg, _handle_arg, _int_arg, _name
from ._handle import _call, _ccall, _Handle
from ._lib import lib
from .device import Device, _device_label
from .semaphore import Fence

__all__ = ["Buffer", "BufferArg", "Scalar"]

_ACCESS_NAMES = {1: "r", 2: "w", 3: "rw"}


class Buffer(_Handle):
    """A view of an allocation. `ready` is the fence of the alloca that made
    it (None for other buffers)."""

    _release = lib.hl_buffer_release
    _kind = "Buffer"
    ready: Optional[Fence] = None

    @classmethod
    def _borrow(cls, ptr: Optional[int]) -> Buffer:
        lib.hl_buffer_retain(ptr)
        return cls._adopt(ptr)

    def __len__(self) -> int:
        return int(_call(lib.hl_buffer_length, self))

    @property
    def length(self) -> int:
        """The view's length in bytes (len(buffer))."""
        return int(_call(lib.hl_buffer_length, self))

    @property
    def offset(self) -> int:
        """The view's offset in its allocation (root), in bytes."""
        return int(_call(lib.hl_buffer_offset, self))

    @property
    def origin(self) -> str:
        """Where the allocation comes from: "async" (Queue.alloca),
        "external" or "persistent" (a registered global)."""
        return _name(lib.hl_buffer_origin_name,
                     _call(lib.hl_buffer_origin, self))

    @property
    def root_id(self) -> int:
        """The id of the allocation (root) this view belongs to; views of
        one allocation share it."""
        return int(_call(lib.hl_buffer_root_id, self))

    @property
    def is_freed(self) -> bool:
        """True once the allocation's memory has been freed (a dealloca
        ran)."""
        return bool(_call(lib.hl_buffer_is_freed, self))

    @property
    def device(self) -> Device:
        """A new reference to the buffer's Device."""
        with self._use() as p:
            return Device._borrow(lib.hl_buffer_device(p))

    def device_pointer(self) -> Optional[int]:
        """The device address (or None before the alloca is issued). The
        root escapes: its fallback release can no longer be queue-ordered."""
        pointer: Optional[int] = _call(lib.hl_buffer_device_pointer, self)
        return pointer

    def subview(self, offset: int, length: int) -> Buffer:
        """A view of [offset, offset + length) of this buffer."""
        out = c_void_p()
        _ccall(lib.hl_buffer_subview, self, _int_arg(offset, "offset"),
               _int_arg(length, "length"), byref(out))
        return Buffer._adopt(out.value)

    def register_global(self) -> None:
        """Makes the root PERSISTENT: it survives until unregister_global(),
        which needs a handle of it. A global keeps its device alive: drop
        it with unregister_global() before the last handle goes, or the
        device is destroyed only at process exit."""
        _ccall(lib.hl_buffer_register_global, self)

    def unregister_global(self) -> None:
        """Undoes register_global(): the root is freed on its last release
        again."""
        _ccall(lib.hl_buffer_unregister_global, self)

    def use_fence(self) -> Fence:
        """A new fence of every timepoint that read or wrote the allocation
        so far (what a dealloca waits for)."""
        f = Fence(device=None)
        _ccall(lib.hl_buffer_use_fence, self, f)
        return f

    def mutation_barrier(self) -> Fence:
        """A new fence of the allocation's last write (what a read waits
        for)."""
        f = Fence(device=None)
        _ccall(lib.hl_buffer_mutation_barrier, self, f)
        return f

    def _describe(self) -> str:
        with self._use() as p:
            where = _device_label(lib.hl_buffer_device(p))
            return "%d bytes at offset %d of root %d (%s) on %s%s" % (
                lib.hl_buffer_length(p), lib.hl_buffer_offset(p),
                lib.hl_buffer_root_id(p),
                _name(lib.hl_buffer_origin_name, lib.hl_buffer_origin(p)),
                where, ", freed" if lib.hl_buffer_is_freed(p) else "")


class BufferArg:
    """A buffer argument of Queue.dispatch with its access ("r", "w",
    "rw") and range (default: the whole buffer)."""

    def __init__(self, buffer: Optional[Buffer],
                 access: Union[str, int] = "rw", offset: int = 0,
                 length: Optional[int] = None) -> None:
        self.buffer: Optional[Buffer] = _handle_arg(buffer, Buffer, "buffer",
                                                    optional=True)
        self.access: int = _enum_arg(_ACCESS, access, "access")
        self.offset: int = _int_arg(offset, "offset")
        self.length: Optional[int] = (None if length is None else
                                      _int_arg(length, "length"))

    def __repr__(self) -> str:
        return "BufferArg(%r, access=%r, offset=%d, length=%r)" % (
            self.buffer, _ACCESS_NAMES.get(self.access, self.access),
            self.offset, self.length)


class Scalar:
    """A scalar argument of Queue.dispatch and Queue.dispatch_executable:
    Scalar.u32(7), Scalar.i32(-1), Scalar.u64(n), Scalar.i64(n),
    Scalar.f32(2.0), Scalar.f64(0.5), or Scalar(bits, size) for |size|
    (1 to 8) little-endian bytes of |bits|. Out-of-range values are
    refused, not wrapped."""

    def __init__(self, bits: int, size: int) -> None:
        self.size: int = _int_arg(size, "size", 1, 8)
        self.bits: int = _int_arg(bits, "bits", 0, 2**(8 * self.size) - 1)

    @classmethod
    def u32(cls, v: int) -> Scalar:
        """An unsigned 32-bit scalar."""
        return cls(_int_arg(v, "value", 0, U32_MAX), 4)

    @classmethod
    def i32(cls, v: int) -> Scalar:
        """A signed 32-bit scalar (two's complement)."""
        return cls(_int_arg(v, "value", -2**31, 2**31 - 1) & U32_MAX, 4)

    @classmethod
    def u64(cls, v: int) -> Scalar:
        """An unsigned 64-bit scalar."""
        return cls(_int_arg(v, "value"), 8)

    @classmethod
    def i64(cls, v: int) -> Scalar:
        """A signed 64-bit scalar (two's complement)."""
        return cls(_int_arg(v, "value", -2**63, 2**63 - 1) & (2**64 - 1), 8)

    @classmethod
    def f32(cls, v: float) -> Scalar:
        """A 32-bit float scalar (rounded to the nearest float)."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("value must be a float, not %s" %
                            type(v).__name__)
        return cls(ctypes.c_uint32.from_buffer(ctypes.c_float(v)).value, 4)

    @classmethod
    def f64(cls, v: float) -> Scalar:
        """A 64-bit float scalar."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("value must be a float, not %s" %
                            type(v).__name__)
        return cls(struct.unpack("<Q", struct.pack("<d", v))[0], 8)

    def __repr__(self) -> str:
        return "Scalar(bits=0x%x, size=%d)" % (self.bits, self.size)

