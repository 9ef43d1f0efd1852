# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Status codes and the exceptions that carry them.

Every failing call raises `Error`, or rather its subclass for the status
code (`NotFoundError`, `InvalidArgumentError`, ...), with hipline's code,
message and source location. `InvalidArgumentError` and `OutOfRangeError`
are also `ValueError`s, as Python code expects of bad arguments.
"""

from __future__ import annotations

import enum
from typing import Dict, Optional, Type, Union

from ._lib import lib

__all__ = [
    "StatusCode", "Error", "CancelledError", "UnknownError",
    "InvalidArgumentError", "DeadlineExceededError", "NotFoundError",
    "AlreadyExistsError", "PermissionDeniedError", "ResourceExhaustedError",
    "FailedPreconditionError", "AbortedError", "OutOfRangeError",
    "UnimplementedError", "InternalError", "UnavailableError",
    "DataLossError", "UnauthenticatedError",
]


class StatusCode(enum.IntEnum):
    """hipline's status codes (hl_status_code_t; the codes of absl/gRPC)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Error(Exception):
    """A hipline status: `code` (StatusCode), `message`, `source`.

    Error(code, message) or, for a per-code subclass, just
    NotFoundError(message)."""

    code: StatusCode = StatusCode.UNKNOWN

    def __init__(self, code: Union[StatusCode, int, str],
                 message: Optional[str] = None, source: str = "") -> None:
        if message is None and isinstance(code, str):
            message = code
            code = type(self).code
        if isinstance(code, str):
            raise TypeError("code must be a StatusCode, not %r" % (code,))
        self.code = StatusCode(code)
        self.message: Optional[str] = message
        self.source: str = source
        super().__init__("%s: %s" % (self.code.name, message))


class CancelledError(Error):
    """CANCELLED: the work was cancelled (e.g. at interpreter exit)."""
    code = StatusCode.CANCELLED


class UnknownError(Error):
    """UNKNOWN: a failure without a more specific code."""
    code = StatusCode.UNKNOWN


class InvalidArgumentError(Error, ValueError):
    """INVALID_ARGUMENT: an argument is wrong whatever the state (also a
    ValueError)."""
    code = StatusCode.INVALID_ARGUMENT


class DeadlineExceededError(Error):
    """DEADLINE_EXCEEDED: a wait timed out."""
    code = StatusCode.DEADLINE_EXCEEDED


class NotFoundError(Error):
    """NOT_FOUND: a name, kernel, backend or code object does not exist."""
    code = StatusCode.NOT_FOUND


class AlreadyExistsError(Error):
    """ALREADY_EXISTS: e.g. a function name registered twice."""
    code = StatusCode.ALREADY_EXISTS


class PermissionDeniedError(Error):
    """PERMISSION_DENIED: e.g. a file that cannot be written."""
    code = StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(Error):
    """RESOURCE_EXHAUSTED: out of memory (the message gives the sizes)."""
    code = StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(Error):
    """FAILED_PRECONDITION: the object is not in a state for the call (a
    closed handle, a use after free, a forked process)."""
    code = StatusCode.FAILED_PRECONDITION


class AbortedError(Error):
    """ABORTED: the work was aborted (the default of Semaphore.fail)."""
    code = StatusCode.ABORTED


class OutOfRangeError(Error, ValueError):
    """OUT_OF_RANGE: a value outside its range (also a ValueError)."""
    code = StatusCode.OUT_OF_RANGE


class UnimplementedError(Error):
    """UNIMPLEMENTED: not supported by this backend or build."""
    code = StatusCode.UNIMPLEMENTED


class InternalError(Error):
    """INTERNAL: a bug, or an exception raised by Python code that hipline
    called (a Function's callable)."""
    code = StatusCode.INTERNAL


class UnavailableError(Error):
    """UNAVAILABLE: a backend, device, file or library is not available."""
    code = StatusCode.UNAVAILABLE


class DataLossError(Error):
    """DATA_LOSS: data was lost (e.g. a write that did not complete)."""
    code = StatusCode.DATA_LOSS


class UnauthenticatedError(Error):
    """UNAUTHENTICATED: not used by hipline today; here for completeness."""
    code = StatusCode.UNAUTHENTICATED


_ERROR_CLASSES: Dict[int, Type[Error]] = {
    cls.code: cls for cls in (
        CancelledError, UnknownError, InvalidArgumentError,
        DeadlineExceededError, NotFoundError, AlreadyExistsError,
        PermissionDeniedError, ResourceExhaustedError,
        FailedPreconditionError, AbortedError, OutOfRangeError,
        UnimplementedError, InternalError, UnavailableError, DataLossError,
        UnauthenticatedError)}


def _make_error(code: int, message: str, source: str = "") -> Error:
    cls = _ERROR_CLASSES.get(code, Error)
    return cls(code, message, source)


def _status_error(status: int, free: bool) -> Error:
    """Turns a non-OK status pointer into an Error (freeing it if |free|)."""
    code = lib.hl_status_code(status)
    message = (lib.hl_status_message(status) or b"").decode("utf-8", "replace")
    source = (lib.hl_status_source(status) or b"").decode("utf-8", "replace")
    if free:
        lib.hl_status_free(status)
    return _make_error(code, message, source)


def _check(status: Optional[int]) -> None:
    if status:
        raise _status_error(status, True)


def _status_from_exception(exc: BaseException, context: str) -> int:
    """A new hl_status_t (owned by the caller) describing |exc|."""
    if isinstance(exc, Error):
        code, text = exc.code, "%s: %s" % (context, exc.message)
    else:
        code = StatusCode.INTERNAL
        text = "%s: %s: %s" % (context, type(exc).__name__, exc)
    status: int = lib.hl_status_make(int(code), b"python", 0, b"%s",
                                     text.encode("utf-8", "replace"))
    return status


def _closed(what: str) -> Error:
    return _make_error(StatusCode.FAILED_PRECONDITION,
                       "%s is closed (already released)" % what)

