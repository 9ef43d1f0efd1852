# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Timeline semaphores and fences."""

from __future__ import annotations

from ctypes import byref, c_bool, c_uint64, c_void_p
from typing import Any, Generator, Iterable, List, Optional, Tuple, Union

from ._args import _deadline, _handle_arg, _int_arg
from ._completion import _await_fence, _fence_pairs, _user_semaphores
from ._handle import _call, _ccall, _check_not_forked, _Handle
from ._lib import lib
from .device import Device
from .errors import Error, StatusCode, _check, _make_error

__all__ = ["Fence", "Semaphore"]


def _failure(e: Error) -> str:
    return "failed %s" % e.code.name


class Semaphore(_Handle):
    """A timeline semaphore: a 64-bit value that only rises, or a failure."""

    _release = lib.hl_semaphore_release
    _kind = "Semaphore"

    def __init__(self, initial_value: int = 0) -> None:
        _check_not_forked()
        value = _int_arg(initial_value, "initial_value")
        out = c_void_p()
        _check(lib.hl_semaphore_create(value, lib.hl_allocator_system(),
                                       byref(out)))
        super().__init__(out.value)
        _user_semaphores[out.value] = self

    @classmethod
    def _borrow(cls, ptr: Optional[int]) -> Semaphore:
        lib.hl_semaphore_retain(ptr)
        return cls._adopt(ptr)

    def _describe(self) -> str:
        try:
            return "value=%d" % self.value
        except Error as e:
            return _failure(e)

    @property
    def value(self) -> int:
        """The current value; raises the failure of a failed semaphore."""
        v = c_uint64()
        _ccall(lib.hl_semaphore_query, self, byref(v))
        return v.value

    def signal(self, value: int) -> None:
        """Raises the value to |value|."""
        _ccall(lib.hl_semaphore_signal, self, _int_arg(value, "value"))

    def fail(self, code: Union[StatusCode, int] = StatusCode.ABORTED,
             message: str = "failed from Python") -> None:
        """Fails the semaphore: every waiter gets Error(code, message)."""
        try:
            code = StatusCode(code)
        except ValueError:
            raise _make_error(StatusCode.OUT_OF_RANGE,
                              "code=%r is not a StatusCode" % (code,))
        if code is StatusCode.OK:
            raise _make_error(StatusCode.INVALID_ARGUMENT,
                              "Semaphore.fail needs a code other than OK")
        text = str(message).replace("\0", "\\0").encode("utf-8", "replace")
        with self._use() as p:
            _check(lib.hl_semaphore_fail(p, lib.hl_status_make(
                int(code), b"python", 0, b"%s", text)))

    def wait(self, value: int, timeout: Optional[float] = None) -> None:
        """Blocks (GIL released) until |value|, a failure or the timeout
        (DeadlineExceededError; None or inf: forever)."""
        _ccall(lib.hl_semaphore_wait, self, _int_arg(value, "value"),
               _deadline(timeout))

    def at(self, value: int, device: Optional[Device] = None) -> Fence:
        """A fence holding self@value."""
        f = Fence(device=device)
        f.insert(self, value)
        return f


class Fence(_Handle):
    """A set of semaphore@value pairs. `await fence` waits for all of them
    (or raises the first failure). `device` names the completion thread that
    delivers awaits; fences from queue operations carry their queue's."""

    _release = lib.hl_fence_release
    _kind = "Fence"
    # A Python function's signal fence: handed to a queue?
    _watch: Optional[List[Any]] = None

    def __init__(self, pairs: Iterable[Tuple[Semaphore, int]] = (),
                 device: Optional[Device] = None) -> None:
        _check_not_forked()
        self.device: Optional[Device] = _handle_arg(device, Device, "device",
                                                    optional=True)
        out = c_void_p()
        _check(lib.hl_fence_create(lib.hl_allocator_system(), byref(out)))
        super().__init__(out.value)
        for sem, value in pairs:
            self.insert(sem, value)

    def _init_borrowed(self, *args: Any) -> None:
        self.device = args[0] if args else None

    @classmethod
    def _borrow(cls, ptr: Optional[int],
                device: Optional[Device] = None) -> Fence:
        lib.hl_fence_retain(ptr)
        return cls._adopt(ptr, device)

    def insert(self, semaphore: Semaphore, value: int) -> Fence:
        """Adds semaphore@value (a semaphore already present keeps the
        higher value)."""
        _handle_arg(semaphore, Semaphore, "semaphore")
        _ccall(lib.hl_fence_insert, self, semaphore, _int_arg(value, "value"))
        return self

    def join(self, other: Optional[Fence]) -> Fence:
        """Adds every pair of |other| (None: nothing)."""
        if other is not None:
            _handle_arg(other, Fence, "other")
            _ccall(lib.hl_fence_join, self, other)
            if other._watch is not None:
                self._watch = other._watch
        return self

    def clear(self) -> None:
        """Removes every pair."""
        _call(lib.hl_fence_clear, self)

    def __len__(self) -> int:
        return int(_call(lib.hl_fence_count, self))

    @property
    def entries(self) -> List[Tuple[Semaphore, int]]:
        """[(Semaphore, value)]: new references to the semaphores."""
        with self._use():
            return [(Semaphore._borrow(s), v) for s, v in _fence_pairs(self)]

    def is_reached(self) -> bool:
        """True when every pair is reached; raises the failure of a failed
        semaphore."""
        r = c_bool()
        _ccall(lib.hl_fence_is_reached, self, byref(r))
        return bool(r.value)

    def wait(self, timeout: Optional[float] = None) -> None:
        """Blocks until every pair is reached (None or inf: forever)."""
        _ccall(lib.hl_fence_wait, self, _deadline(timeout))

    def __await__(self) -> Generator[Any, None, None]:
        return _await_fence(self, self.device, self).__await__()

    def _describe(self) -> str:
        n = len(self)
        try:
            state = "reached" if self.is_reached() else "pending"
        except Error as e:
            state = _failure(e)
        return "%d pair%s, %s" % (n, "" if n == 1 else "s", state)


