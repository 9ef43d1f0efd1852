"""Buffers (views of allocations) and the arguments of a dispatch."""

import ctypes
from ctypes import byref, c_void_p

from ._args import U32_MAX, _ACCESS, _enum_arg, _handle_arg, _int_arg, _name
from ._handle import _call, _ccall, _Handle
from ._lib import lib
from .device import Device
from .semaphore import Fence



class Buffer(_Handle):
    """A view of an allocation. `ready` is the fence of the alloca that made
    it (None for other buffers)."""

    _release = lib.hl_buffer_release
    _kind = "Buffer"
    ready = None

    @classmethod
    def _borrow(cls, ptr):
        lib.hl_buffer_retain(ptr)
        return cls._adopt(ptr)

    def __len__(self):
        return _call(lib.hl_buffer_length, self)

    @property
    def length(self):
        return _call(lib.hl_buffer_length, self)

    @property
    def offset(self):
        return _call(lib.hl_buffer_offset, self)

    @property
    def origin(self):
        return _name(lib.hl_buffer_origin_name,
                     _call(lib.hl_buffer_origin, self))

    @property
    def root_id(self):
        return _call(lib.hl_buffer_root_id, self)

    @property
    def is_freed(self):
        return bool(_call(lib.hl_buffer_is_freed, self))

    @property
    def device(self):
        """A new reference to the buffer's Device."""
        with self._use() as p:
            return Device._borrow(lib.hl_buffer_device(p))

    def device_pointer(self):
        """The device address (or None before the alloca is issued). The
        root escapes: its fallback release can no longer be queue-ordered."""
        return _call(lib.hl_buffer_device_pointer, self)

    def subview(self, offset, length):
        """A view of [offset, offset + length) of this buffer."""
        out = c_void_p()
        _ccall(lib.hl_buffer_subview, self, _int_arg(offset, "offset"),
               _int_arg(length, "length"), byref(out))
        return Buffer._adopt(out.value)

    def register_global(self):
        """Makes the root PERSISTENT: it survives until unregister_global(),
        which needs a handle of it. A global keeps its device alive: drop
        it with unregister_global() before the last handle goes, or the
        device is destroyed only at process exit."""
        _ccall(lib.hl_buffer_register_global, self)

    def unregister_global(self):
        _ccall(lib.hl_buffer_unregister_global, self)

    def use_fence(self):
        f = Fence(device=None)
        _ccall(lib.hl_buffer_use_fence, self, f)
        return f

    def mutation_barrier(self):
        f = Fence(device=None)
        _ccall(lib.hl_buffer_mutation_barrier, self, f)
        return f

    def __repr__(self):
        if self._ptr is None:
            return "<hipline.Buffer closed>"
        return "<hipline.Buffer root %d, %d bytes at offset %d>" % (
            self.root_id, len(self), self.offset)


class BufferArg:
    """A buffer argument of Queue.dispatch with its access ("r", "w",
    "rw") and range (default: the whole buffer)."""

    def __init__(self, buffer, access="rw", offset=0, length=None):
        self.buffer = _handle_arg(buffer, Buffer, "buffer", optional=True)
        self.access = _enum_arg(_ACCESS, access, "access")
        self.offset = _int_arg(offset, "offset")
        self.length = None if length is None else _int_arg(length, "length")

    def __repr__(self):
        return "BufferArg(%r, access=%d, offset=%d, length=%r)" % (
            self.buffer, self.access, self.offset, self.length)


class Scalar:
    """A scalar argument of Queue.dispatch: Scalar.u32(7), Scalar.u64(n),
    Scalar.f32(2.0). Out-of-range values are refused, not wrapped."""

    def __init__(self, bits, size):
        self.size = _int_arg(size, "size", 1, 8)
        self.bits = _int_arg(bits, "bits", 0, 2**(8 * self.size) - 1)

    @classmethod
    def u32(cls, v):
        return cls(_int_arg(v, "value", 0, U32_MAX), 4)

    @classmethod
    def u64(cls, v):
        return cls(_int_arg(v, "value"), 8)

    @classmethod
    def f32(cls, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("value must be a float, not %s" %
                            type(v).__name__)
        return cls(ctypes.c_uint32.from_buffer(ctypes.c_float(v)).value, 4)

    def __repr__(self):
        return "Scalar(bits=0x%x, size=%d)" % (self.bits, self.size)

