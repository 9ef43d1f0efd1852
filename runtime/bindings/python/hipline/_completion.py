# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Completion callbacks (one ctypes callback for every wait) and the exit
handling: what queued work can still run finishes; what cannot is
cancelled."""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
import weakref
from ctypes import byref, c_uint64, c_void_p
from typing import (TYPE_CHECKING, Any, Dict, Iterable, List, Optional,
                    Tuple)

from . import _lib
from ._args import _deadline
from ._handle import _ccall, _drain_graveyard, _forked, _tls
from ._lib import lib
from .errors import Error, StatusCode, _check, _status_error

if TYPE_CHECKING:
    from .device import Device
    from .queue import Queue
    from .semaphore import Fence, Semaphore

__all__ = ["pending_callbacks"]


# token -> (loop or None, future or None, keep-alive objects)
_pending: Dict[int, Tuple[Any, Any, Any]] = {}
_pending_lock = threading.Lock()
_next_token = [1]
_notifier_device: List[Optional[Device]] = [None]


def _settle(fut: asyncio.Future[None], err: Optional[Error]) -> None:
    if fut.done():  # Cancelled by the awaiting task.
        return
    if err is None:
        fut.set_result(None)
    else:
        fut.set_exception(err)


def _on_reached(user: int, status: Optional[int]) -> None:
    # Runs on the device's completion thread with the GIL.
    _tls.runtime_thread = True
    try:
        with _pending_lock:
            entry = _pending.pop(user, None)
        if entry is None:
            return
        loop, fut, keep = entry
        err = _status_error(status, False) if status else None
        if loop is not None:
            try:
                # |keep| rides along so it is dropped on the loop's thread.
                loop.call_soon_threadsafe(_settle_keep, fut, err, keep)
            except RuntimeError:  # The loop is closed.
                pass
        # Whatever |keep| releases here goes to the graveyard (flag above).
        del entry, keep
    except BaseException:  # Never let an exception into C.
        pass
    finally:
        _tls.runtime_thread = False


def _settle_keep(fut: asyncio.Future[None], err: Optional[Error],
                 keep: Any) -> None:
    _settle(fut, err)


# Lives as long as the module.
_ON_REACHED = _lib.fence_reached_fn(_on_reached)


def _notify(fence: Fence, device: Device,
            loop: Optional[asyncio.AbstractEventLoop],
            fut: Optional[asyncio.Future[None]], keep: Any) -> None:
    """Calls back when |fence| is reached or fails, on |device|'s completion
    thread; |keep| stays referenced until then."""
    _drain_graveyard()
    with _pending_lock:
        token = _next_token[0]
        _next_token[0] += 1
        _pending[token] = (loop, fut, keep)
    try:
        _ccall(lib.hl_fence_call_when_reached, fence, device, _ON_REACHED,
               token)
    except BaseException:
        with _pending_lock:
            _pending.pop(token, None)
        raise


#===----------------------------------------------------------------------===#

_user_semaphores: weakref.WeakValueDictionary[Optional[int], Semaphore] = \
    weakref.WeakValueDictionary()  # ptr -> Semaphore().
# semaphore ptr -> highest value queued work waits for / will signal.
_awaited: Dict[Optional[int], int] = {}
_promised: Dict[Optional[int], int] = {}
_live_queues: weakref.WeakSet[Queue] = weakref.WeakSet()
_track_lock = threading.Lock()


def _fence_pairs(fence: Fence) -> List[Tuple[Optional[int], int]]:
    """[(semaphore ptr, value)] of a Fence (its use held by the caller)."""
    out, p = [], fence._ptr
    for i in range(lib.hl_fence_count(p)):
        sem, value = c_void_p(), c_uint64()
        lib.hl_fence_entry(p, i, byref(sem), byref(value))
        out.append((sem.value, value.value))
    return out


def _track(table: Dict[Optional[int], int],
           pairs: Iterable[Tuple[Optional[int], int]]) -> None:
    with _track_lock:
        for ptr, value in pairs:
            if ptr in _user_semaphores and table.get(ptr, -1) < value:
                table[ptr] = value


def _cancel_unsignalable() -> int:
    """Fails every Python-made semaphore that queued work waits for at a
    value no queued work will signal (at exit nothing else can). Returns
    how many."""
    with _track_lock:
        stuck = [(sem, _awaited[ptr]) for ptr, sem in
                 list(_user_semaphores.items())
                 if ptr in _awaited and _promised.get(ptr, -1) <
                 _awaited[ptr]]
    n = 0
    for sem, value in stuck:
        try:
            if sem.value >= value:
                continue
            sem.fail(StatusCode.CANCELLED,
                     "the interpreter is exiting and nothing can signal "
                     "this semaphore any more")
            n += 1
        except Error:  # Closed, or failed already.
            pass
    return n


def _settle_at_exit() -> None:
    """Before the interpreter finalizes, so no completion callback runs into
    a dying interpreter: cancels the work that cannot run any more (it waits
    on a semaphore only host code could signal), then waits for the rest."""
    if _forked[0]:
        return
    cancelled = _cancel_unsignalable()
    if cancelled:
        import sys
        print("hipline: at exit, %d semaphore(s) that queued work waited on "
              "could no longer be signalled; they were failed (CANCELLED) "
              "and that work did not run" % cancelled, file=sys.stderr)
    for q in list(_live_queues):
        try:
            with q._use() as p:
                # Bounded: a semaphore made outside Python can still hold it.
                _check(lib.hl_queue_wait_idle(p, _deadline(30)))
        except Exception:  # Closed, or failed: its callbacks have fired.
            pass
    # Callbacks already queued on completion threads: wait while they drain.
    last, quiet_since = -1, time.monotonic()
    while True:
        n = pending_callbacks()
        now = time.monotonic()
        if n != last:
            last, quiet_since = n, now
        if n == 0 or now - quiet_since > 0.2:
            break
        time.sleep(0.005)
    _drain_graveyard()


atexit.register(_settle_at_exit)


def pending_callbacks() -> int:
    """The number of completion callbacks (awaits of fences, keep-alives of
    host memory and callables handed to queue operations) registered and
    not yet fired. 0 once every awaited fence and queue operation has
    completed."""
    with _pending_lock:
        return len(_pending)


def _default_notifier() -> Device:
    # For fences that belong to no device (built by hand from semaphores):
    # a host device whose completion thread delivers their callbacks.
    with _pending_lock:
        dev = _notifier_device[0]
    if dev is None:
        from .device import Device  # device.py imports this module.
        dev = Device("host")
        with _pending_lock:
            if _notifier_device[0] is None:
                _notifier_device[0] = dev
            else:
                dev.close()
                dev = _notifier_device[0]
    return dev


def _await_fence(fence: Fence, device: Optional[Device],
                 keep: Any) -> asyncio.Future[None]:
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    if device is None or device.closed:
        device = _default_notifier()
    _notify(fence, device, loop, fut, (keep, device))
    return fut

