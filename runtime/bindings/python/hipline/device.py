"""Devices and backends."""

from ctypes import byref, c_void_p

from . import _lib
from ._args import (I32_MAX, U32_MAX, _BACKENDS, _FALLBACKS, _deadline,
                    _enum_arg, _int_arg, _name)
from ._handle import _call, _ccall, _check_not_forked, _Handle
from ._lib import lib
from .errors import _check
from .info import (BackendInfo, DeviceProperties, InvocationStats,
                   MemoryStats, PoolAttributes, _struct_to)

def backend_query(kind="host"):
    """What a backend offers here: BackendInfo(kind, available,
    device_count, reason)."""
    info = _lib.backend_info_t()
    _check(lib.hl_backend_query(_enum_arg(_BACKENDS, kind, "backend"),
                                byref(info)))
    return BackendInfo(_name(lib.hl_backend_kind_name, info.kind),
                       bool(info.available), info.device_count,
                       info.reason.decode("utf-8", "replace"))


def environment_check():
    """Raises InvalidArgumentError naming the first invalid HIPLINE_*
    variable."""
    _check(lib.hl_environment_check())


def live_device_count():
    """Devices created and not yet destroyed, process-wide."""
    return lib.hl_device_live_count()





class Device(_Handle):
    """A device: `Device("host")`, `Device("hip", ordinal=1)`, `Device()`
    (HIPLINE_BACKEND, then hip if present, else host).

    fallback: None (HIPLINE_FALLBACK, else "ordered"), "ordered",
        "frontier" or "device-sync".
    checked: None (HIPLINE_CHECKED), True or False.
    pool_release_threshold, pool_reuse_flags: None (the defaults) or
        unsigned 64- and 32-bit values.
    """

    _release = lib.hl_device_release
    _kind = "Device"

    def __init__(self, backend="auto", ordinal=0, fallback=None, checked=None,
                 pool_release_threshold=None, pool_reuse_flags=None):
        _check_not_forked()
        opts = _lib.device_options_t()
        lib.hl_device_options_initialize(byref(opts))
        opts.backend = _enum_arg(_BACKENDS, backend, "backend")
        opts.ordinal = _int_arg(ordinal, "ordinal", 0, I32_MAX)
        opts.fallback = _enum_arg(_FALLBACKS, fallback, "fallback mode")
        if checked is not None:
            if not isinstance(checked, bool):
                raise TypeError("checked must be None, True or False, not %s"
                                % type(checked).__name__)
            opts.checked = 1 if checked else 0
        if pool_release_threshold is not None:
            opts.pool.release_threshold = _int_arg(
                pool_release_threshold, "pool_release_threshold")
            opts.pool_release_threshold_set = True
        if pool_reuse_flags is not None:
            opts.pool.reuse_flags = _int_arg(pool_reuse_flags,
                                             "pool_reuse_flags", 0, U32_MAX)
            opts.pool_reuse_flags_set = True
        out = c_void_p()
        _check(lib.hl_device_create(byref(opts), lib.hl_allocator_system(),
                                    byref(out)))
        super().__init__(out.value)

    @classmethod
    def _borrow(cls, ptr):
        lib.hl_device_retain(ptr)
        return cls._adopt(ptr)

    @property
    def properties(self):
        """DeviceProperties(backend, ordinal, name, target, memory_bytes,
        compute_units)."""
        p = _lib.device_properties_t()
        _ccall(lib.hl_device_properties, self, byref(p))
        return DeviceProperties(_name(lib.hl_backend_kind_name, p.backend),
                                p.ordinal, p.name.decode(), p.target.decode(),
                                p.memory_bytes, p.compute_units)

    @property
    def fallback_mode(self):
        return _name(lib.hl_fallback_mode_name,
                     _call(lib.hl_device_fallback_mode, self))

    @property
    def checked(self):
        return bool(_call(lib.hl_device_checked, self))

    @property
    def pool_attributes(self):
        a = _lib.pool_attributes_t()
        _ccall(lib.hl_device_pool_attributes, self, byref(a))
        return PoolAttributes(a.release_threshold, a.reuse_flags,
                              a.limit_bytes)

    def trim(self, min_bytes_to_keep=0):
        """Returns pooled memory beyond |min_bytes_to_keep| to the system."""
        _ccall(lib.hl_device_trim, self,
               _int_arg(min_bytes_to_keep, "min_bytes_to_keep"))

    def wait_idle(self, timeout=None):
        """Blocks until every queue of the device is idle (None or inf:
        forever)."""
        _ccall(lib.hl_device_wait_idle, self, _deadline(timeout))

    def memory_stats(self):
        s = _lib.memory_stats_t()
        _ccall(lib.hl_device_memory_stats, self, byref(s))
        return _struct_to(MemoryStats, s)

    def reset_peak_memory_stats(self):
        """Starts the memory peaks (bytes_in_use_peak of the device and its
        queues, bytes_reserved_peak) again from the current values, like
        torch.cuda.reset_peak_memory_stats."""
        _check(lib.hl_device_reset_peak_memory_stats(self._p))

    def invocation_stats(self):
        s = _lib.invocation_stats_t()
        _ccall(lib.hl_device_invocation_stats, self, byref(s))
        return _struct_to(InvocationStats, s)

    def create_queue(self):
        """A new Queue on this device."""
        from .queue import Queue  # queue.py imports this module.
        return Queue(self)

    def fence(self):
        """An empty fence whose awaits are delivered by this device."""
        from .semaphore import Fence  # semaphore.py imports this module.
        return Fence(device=self)


