# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Handles: released once, deterministically or by the GC."""

from __future__ import annotations

import os
import threading
from types import TracebackType
from typing import Any, Callable, List, Optional, Tuple, Type, TypeVar

from .errors import StatusCode, _check, _closed, _make_error

__all__: List[str] = []

_H = TypeVar("_H", bound="_Handle")

_tls = threading.local()  # .runtime_thread: inside a callback from hipline.
# (release_fn, ptr) dropped on a hipline thread.
_graveyard: List[Tuple[Any, int]] = []
_graveyard_lock = threading.Lock()
_handle_lock = threading.Lock()
_forked = [False]  # In a child forked from a process that loaded hipline.


def _after_fork_in_child() -> None:
    _forked[0] = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_not_forked() -> None:
    if _forked[0]:
        raise _make_error(
            StatusCode.FAILED_PRECONDITION,
            "hipline cannot be used in a process forked (os.fork) from one "
            "that loaded it: the runtime's threads did not survive the fork "
            "(use multiprocessing's 'spawn' or 'forkserver' start method)")


def _on_runtime_thread() -> bool:
    return getattr(_tls, "runtime_thread", False)


def _drain_graveyard() -> None:
    if not _graveyard or _on_runtime_thread() or _forked[0]:
        return
    with _graveyard_lock:
        items = list(_graveyard)
        _graveyard.clear()
    for release, ptr in items:
        release(ptr)


def _release_ptr(release: Any, ptr: int) -> None:
    if _forked[0]:
        return  # The parent owns it; nothing here can release it safely.
    if _on_runtime_thread():
        # Never release on hipline's own threads: a last queue or device
        # release waits for work those threads complete.
        with _graveyard_lock:
            _graveyard.append((release, ptr))
    else:
        release(ptr)


class _Use:
    """`with handle._use() as ptr:` the pointer stays valid inside, even if
    another thread closes the handle meanwhile (the release waits for the
    last use to end)."""

    __slots__ = ("handle",)

    def __init__(self, handle: _Handle) -> None:
        self.handle = handle

    def __enter__(self) -> int:
        return self.handle._acquire()

    def __exit__(self, *exc: object) -> None:
        self.handle._unuse()


class _Handle:
    """Owns one reference to a C object.

    Every call into C that passes the pointer holds a *use* (`_acquire` /
    `_unuse`, or `_call`); `close()` from any thread takes the pointer away
    at once (later uses raise FailedPreconditionError) and the C release
    happens when the last use in flight ends."""

    _release: Any = None  # The C release function.
    _kind = "handle"
    _ptr: Optional[int] = None
    _uses = 0
    _doomed: Optional[int] = None  # Pointer closed while uses were in flight.

    def __init__(self, ptr: Optional[int]) -> None:
        self._ptr = ptr

    @classmethod
    def _adopt(cls: Type[_H], ptr: Optional[int], *args: Any) -> _H:
        obj = cls.__new__(cls)
        _Handle.__init__(obj, ptr)
        obj._init_borrowed(*args)
        return obj

    def _init_borrowed(self, *args: Any) -> None:
        pass

    def _acquire(self) -> int:
        _check_not_forked()
        with _handle_lock:
            ptr = self._ptr
            if ptr is None:
                raise _closed(self._kind)
            self._uses += 1
        return ptr

    def _unuse(self) -> None:
        with _handle_lock:
            self._uses -= 1
            ptr = None
            if self._uses == 0 and self._doomed is not None:
                ptr, self._doomed = self._doomed, None
        if ptr is not None:
            _release_ptr(type(self)._release, ptr)

    def _use(self) -> _Use:
        return _Use(self)

    @property
    def _p(self) -> int:
        # Only for pointers handed straight to a borrow (the caller holds a
        # use of another handle that keeps the object alive).
        _check_not_forked()
        ptr = self._ptr
        if ptr is None:
            raise _closed(self._kind)
        return ptr

    @property
    def closed(self) -> bool:
        """True once close() was called (or the handle was never opened)."""
        return self._ptr is None

    def close(self) -> None:
        """Releases the reference now (once the calls in flight on other
        threads return). Further use raises FailedPreconditionError; closing
        twice is a no-op."""
        with _handle_lock:
            ptr, self._ptr = self._ptr, None
            if ptr is not None and self._uses:
                self._doomed, ptr = ptr, None
        if ptr is not None:
            _release_ptr(type(self)._release, ptr)
        _drain_graveyard()

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()

    def _describe(self) -> str:
        """What repr() shows of an open handle after its class name."""
        return "0x%x" % (self._ptr or 0)

    def __repr__(self) -> str:
        name = "hipline." + type(self).__name__
        if self._ptr is None:
            return "<%s closed>" % name
        try:
            details = self._describe()
        except Exception:  # Closed meanwhile, forked, or failed: say so.
            return "<%s closed>" % name if self._ptr is None else \
                "<%s 0x%x>" % (name, self._ptr)
        return "<%s %s>" % (name, details)

    def __del__(self) -> None:
        ptr = self.__dict__.get("_ptr")
        if ptr is None:
            return
        self._ptr = None
        try:
            _release_ptr(type(self)._release, ptr)
        except Exception:  # Interpreter shutdown: nothing left to do.
            pass


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) with every _Handle argument replaced by its pointer, each
    held in use for the call."""
    held: List[_Handle] = []
    try:
        cargs: List[Any] = []
        for a in args:
            if isinstance(a, _Handle):
                cargs.append(a._acquire())
                held.append(a)
            else:
                cargs.append(a)
        return fn(*cargs)
    finally:
        for h in held:
            h._unuse()


def _ccall(fn: Callable[..., Any], *args: Any) -> None:
    """_call, raising the returned status."""
    _check(_call(fn, *args))

