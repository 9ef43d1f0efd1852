# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Argument checks: every public integer, float, string and handle argument
is checked here, so nothing is truncated to a C width on the way down."""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, List, Mapping, Optional, Type, TypeVar

from ._lib import lib
from .errors import StatusCode, _make_error

__all__: List[str] = []

_T = TypeVar("_T")

INFINITE = 2**63 - 1  # HL_INFINITE_FUTURE


U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
I32_MAX = 2**31 - 1


def _int_arg(value: Any, name: str, lo: int = 0, hi: int = U64_MAX) -> int:
    """|value| as an int in [lo, hi]; TypeError or OutOfRangeError naming
    |name| otherwise (bools are refused: they are not counts)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError("%s must be an int, not %s" %
                        (name, type(value).__name__))
    number: int = operator.index(value)
    if not lo <= number <= hi:
        raise _make_error(StatusCode.OUT_OF_RANGE,
                          "%s=%d is out of range [%d, %d]" %
                          (name, number, lo, hi))
    return number


def _str_arg(value: Any, name: str) -> bytes:
    """|value| as NUL-free UTF-8 bytes."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %s" %
                        (name, type(value).__name__))
    if "\0" in value:
        raise _make_error(StatusCode.INVALID_ARGUMENT,
                          "%s contains a NUL character: %r" % (name, value))
    return value.encode("utf-8")


def _handle_arg(value: Any, cls: Type[_T], name: str,
                optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, cls):
        raise TypeError("%s must be a %s%s, not %s" %
                        (name, cls.__name__, " or None" if optional else "",
                         type(value).__name__))
    return value


def _deadline(timeout: Optional[float], name: str = "timeout") -> int:
    """A deadline |timeout| seconds away: None or inf is forever; NaN,
    negative values and non-numbers are refused."""
    if timeout is None:
        return INFINITE
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError("%s must be a number of seconds or None, not %s" %
                        (name, type(timeout).__name__))
    if math.isnan(timeout) or timeout < 0:
        raise _make_error(StatusCode.OUT_OF_RANGE,
                          "%s=%r must be >= 0 seconds (None or inf: forever)"
                          % (name, timeout))
    if math.isinf(timeout) or timeout * 1e9 >= INFINITE:
        return INFINITE
    return int(lib.hl_deadline_after(int(timeout * 1e9)))


def _name(ptr_fn: Callable[[int], Optional[bytes]], value: int) -> str:
    return (ptr_fn(value) or b"").decode()


_BACKENDS = {"auto": 0, "host": 1, "hip": 2}
_FALLBACKS = {None: 0, "default": 0, "frontier": 1, "device-sync": 2,
              "ordered": 3}
_ACCESS = {"r": 1, "read": 1, "w": 2, "write": 2, "rw": 3, "read_write": 3}


def _enum_arg(table: Mapping[Any, int], value: Any, what: str) -> int:
    if (isinstance(value, int) and not isinstance(value, bool) and
            value in table.values()):
        return value
    try:
        return table[value]
    except (KeyError, TypeError):
        raise _make_error(
            StatusCode.INVALID_ARGUMENT, "unknown %s %r (accepted: %s)" %
            (what, value, ", ".join(str(k) for k in table if k is not None)))

