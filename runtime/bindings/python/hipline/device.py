# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Devices and backends."""

from __future__ import annotations

import contextlib
from ctypes import byref, c_bool, c_int, c_void_p
from typing import TYPE_CHECKING, Iterable, List, Optional, Union

from . import _lib
from ._args import (I32_MAX, U32_MAX, _BACKENDS, _FALLBACKS, _deadline,
                    _enum_arg, _handle_arg, _int_arg, _name)
from ._handle import _call, _ccall, _check_not_forked, _Handle
from ._lib import lib
from .errors import StatusCode, UnavailableError, _check, _make_error
from .info import (BackendInfo, DeviceProperties, InvocationStats,
                   MemoryStats, PeerStats, PoolAttributes, _struct_to)

if TYPE_CHECKING:
    from .queue import Queue
    from .semaphore import Fence

__all__ = ["Device", "backend_query", "devices", "enable_peer_access",
           "environment_check", "live_device_count"]


def backend_query(kind: Union[str, int] = "host") -> BackendInfo:
    """What backend |kind| ("host" or "hip") offers here:
    BackendInfo(kind, available, device_count, reason)."""
    info = _lib.backend_info_t()
    _check(lib.hl_backend_query(_enum_arg(_BACKENDS, kind, "backend"),
                                byref(info)))
    return BackendInfo(_name(lib.hl_backend_kind_name, info.kind),
                       bool(info.available), info.device_count,
                       info.reason.decode("utf-8", "replace"))


def environment_check() -> None:
    """Raises InvalidArgumentError naming the first invalid HIPLINE_*
    variable."""
    _check(lib.hl_environment_check())


def live_device_count() -> int:
    """The number of devices created and not yet destroyed, process-wide."""
    return int(lib.hl_device_live_count())


def _resolve(backend: Union[str, int]) -> int:
    """The backend kind |backend| names, "auto" resolved as Device() does
    (HIPLINE_BACKEND, then hip if present, else host)."""
    kind = _enum_arg(_BACKENDS, backend, "backend")
    if kind == _BACKENDS["auto"]:
        out = c_int(0)
        _check(lib.hl_backend_resolve(kind, byref(out)))
        kind = out.value
    return kind


def _device_count(backend: Union[str, int]) -> int:
    try:
        info = backend_query(_resolve(backend))
    except UnavailableError:
        return 0
    return info.device_count if info.available else 0


def devices(backend: Union[str, int] = "auto",
            fallback: Optional[str] = None, checked: Optional[bool] = None,
            pool_release_threshold: Optional[int] = None,
            pool_reuse_flags: Optional[int] = None) -> List[Device]:
    """Opens every device of |backend| ("host", "hip" or "auto", resolved
    as Device() does) in ordinal order, with Device's options; the caller
    closes them. As many as Device.count(backend): HIPLINE_HOST_DEVICES on
    the host backend, every GPU on hip. A backend not available here
    raises UnavailableError with its reason. If one device fails to open,
    the ones already opened are closed and its error is raised."""
    info = backend_query(_resolve(backend))
    if not info.available:
        raise _make_error(StatusCode.UNAVAILABLE,
                          "backend '%s' is unavailable: %s" %
                          (info.kind, info.reason))
    opened: List[Device] = []
    try:
        for ordinal in range(info.device_count):
            opened.append(Device(info.kind, ordinal, fallback, checked,
                                 pool_release_threshold, pool_reuse_flags))
    except BaseException:
        for d in opened:
            d.close()
        raise
    return opened


def _device_list(devices: Iterable[Device], what: str) -> List[Device]:
    if isinstance(devices, Device) or not hasattr(devices, "__iter__"):
        raise TypeError("%s must be an iterable of Device, not %s" %
                        (what, type(devices).__name__))
    listed = list(devices)
    for i, d in enumerate(listed):
        _handle_arg(d, Device, "%s[%d]" % (what, i))
    if not listed:
        raise _make_error(StatusCode.INVALID_ARGUMENT,
                          "%s is empty: give the devices whose queues "
                          "should reach each other's memory" % what)
    return listed


def enable_peer_access(devices: Iterable[Device]) -> None:
    """Lets the queues of every device in |devices| reach the memory of
    every other one that Device.can_access_peer allows
    (hl_device_enable_peer_access): Queue.copy between them becomes one
    peer copy, and dispatches and invocations may take a peer's buffers.
    Pairs that cannot reach each other are left as they are (their copies
    are staged through host memory). Idempotent; access is never disabled
    while the devices live. All devices must be of one backend
    (InvalidArgumentError); an empty list is InvalidArgumentError, a closed
    device FailedPreconditionError, anything but a Device TypeError."""
    listed = _device_list(devices, "devices")
    array = (c_void_p * len(listed))()
    with contextlib.ExitStack() as stack:
        for i, d in enumerate(listed):
            array[i] = stack.enter_context(d._use())
        _check(lib.hl_device_enable_peer_access(array, len(listed)))


def _device_label(ptr: int) -> str:
    """"backend:ordinal" of the device |ptr| (a use of it held)."""
    props = _lib.device_properties_t()
    status = lib.hl_device_properties(ptr, byref(props))
    if status:
        lib.hl_status_free(status)
        return "?"
    return "%s:%d" % (_name(lib.hl_backend_kind_name, props.backend),
                      props.ordinal)


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

    def __init__(self, backend: Union[str, int] = "auto", ordinal: int = 0,
                 fallback: Optional[str] = None,
                 checked: Optional[bool] = None,
                 pool_release_threshold: Optional[int] = None,
                 pool_reuse_flags: Optional[int] = None) -> None:
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
    def _borrow(cls, ptr: Optional[int]) -> Device:
        lib.hl_device_retain(ptr)
        return cls._adopt(ptr)

    @staticmethod
    def count(backend: Union[str, int] = "auto") -> int:
        """How many devices |backend| ("host", "hip" or "auto", resolved as
        Device() does) has here, 0 when it is not available:
        hipline.devices(backend) opens them all, Device(backend, ordinal)
        one of them."""
        return _device_count(backend)

    def _describe(self) -> str:
        p = self.properties
        return "%r ordinal=%d target=%r name=%r" % (p.backend, p.ordinal,
                                                    p.target, p.name)

    @property
    def properties(self) -> DeviceProperties:
        """DeviceProperties(backend, ordinal, name, target, memory_bytes,
        compute_units)."""
        p = _lib.device_properties_t()
        _ccall(lib.hl_device_properties, self, byref(p))
        return DeviceProperties(_name(lib.hl_backend_kind_name, p.backend),
                                p.ordinal, p.name.decode(), p.target.decode(),
                                p.memory_bytes, p.compute_units)

    @property
    def fallback_mode(self) -> str:
        """How results that may be aliased are freed: "ordered",
        "frontier" or "device-sync" (docs/freeing.md)."""
        return _name(lib.hl_fallback_mode_name,
                     _call(lib.hl_device_fallback_mode, self))

    @property
    def checked(self) -> bool:
        """True in checked mode (bindings checked for use after free when
        work runs; freed memory poisoned)."""
        return bool(_call(lib.hl_device_checked, self))

    @property
    def pool_attributes(self) -> PoolAttributes:
        """The device pool's PoolAttributes(release_threshold, reuse_flags,
        limit_bytes)."""
        a = _lib.pool_attributes_t()
        _ccall(lib.hl_device_pool_attributes, self, byref(a))
        return PoolAttributes(a.release_threshold, a.reuse_flags,
                              a.limit_bytes)

    def trim(self, min_bytes_to_keep: int = 0) -> None:
        """Returns pooled memory beyond |min_bytes_to_keep| to the system."""
        _ccall(lib.hl_device_trim, self,
               _int_arg(min_bytes_to_keep, "min_bytes_to_keep"))

    def wait_idle(self, timeout: Optional[float] = None) -> None:
        """Blocks until every queue of the device is idle (None or inf:
        forever)."""
        _ccall(lib.hl_device_wait_idle, self, _deadline(timeout))

    def memory_stats(self) -> MemoryStats:
        """The device's MemoryStats (every queue and the pool)."""
        s = _lib.memory_stats_t()
        _ccall(lib.hl_device_memory_stats, self, byref(s))
        return _struct_to(MemoryStats, s)

    def reset_peak_memory_stats(self) -> None:
        """Starts the memory peaks (bytes_in_use_peak of the device and its
        queues, bytes_reserved_peak) again from the current values, like
        torch.cuda.reset_peak_memory_stats."""
        _ccall(lib.hl_device_reset_peak_memory_stats, self)

    def invocation_stats(self) -> InvocationStats:
        """The InvocationStats of the invocations on this device's queues."""
        s = _lib.invocation_stats_t()
        _ccall(lib.hl_device_invocation_stats, self, byref(s))
        return _struct_to(InvocationStats, s)

    def can_access_peer(self, peer: Device) -> bool:
        """Whether this device's queues can be given access to the memory
        of |peer| (hl_device_can_access_peer; True for the device itself;
        devices of two backends raise InvalidArgumentError). Makes no
        change: hipline.enable_peer_access enables it."""
        _handle_arg(peer, Device, "peer")
        out = c_bool(False)
        _ccall(lib.hl_device_can_access_peer, self, peer, byref(out))
        return bool(out.value)

    def peer_access_enabled(self, peer: Device) -> bool:
        """Whether this device's queues reach |peer|'s memory now: it is
        the same device, or hipline.enable_peer_access enabled the pair.
        Without it, Queue.copy between the two is staged through host
        memory."""
        _handle_arg(peer, Device, "peer")
        return bool(_call(lib.hl_device_peer_access_enabled, self, peer))

    def peer_stats(self) -> PeerStats:
        """The PeerStats of this device's queues: peer and staged copies
        with their bytes, and device-side waits on other devices'
        signals."""
        s = _lib.device_peer_stats_t()
        _call(lib.hl_device_peer_stats, self, byref(s))
        return _struct_to(PeerStats, s)

    def create_queue(self) -> Queue:
        """A new Queue on this device."""
        from .queue import Queue  # queue.py imports this module.
        return Queue(self)

    def fence(self) -> Fence:
        """An empty fence whose awaits are delivered by this device."""
        from .semaphore import Fence  # semaphore.py imports this module.
        return Fence(device=self)


