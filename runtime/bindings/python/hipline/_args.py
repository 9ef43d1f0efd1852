"""Argument checks: every public integer, float, string and handle argument
is checked here, so nothing is truncated to a C width on the way down."""

import math
import operator

from ._lib import lib
from .errors import StatusCode, _make_error

INFINITE = 2**63 - 1  # HL_INFINITE_FUTURE


U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
I32_MAX = 2**31 - 1


def _int_arg(value, name, lo=0, hi=U64_MAX):
    """|value| as an int in [lo, hi]; TypeError or OutOfRangeError naming
    |name| otherwise (bools are refused: they are not counts)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError("%s must be an int, not %s" %
                        (name, type(value).__name__))
    value = operator.index(value)
    if not lo <= value <= hi:
        raise _make_error(StatusCode.OUT_OF_RANGE,
                          "%s=%d is out of range [%d, %d]" %
                          (name, value, lo, hi))
    return value


def _str_arg(value, name):
    """|value| as NUL-free UTF-8 bytes."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %s" %
                        (name, type(value).__name__))
    if "\0" in value:
        raise _make_error(StatusCode.INVALID_ARGUMENT,
                          "%s contains a NUL character: %r" % (name, value))
    return value.encode("utf-8")


def _handle_arg(value, cls, name, optional=False):
    if value is None and optional:
        return None
    if not isinstance(value, cls):
        raise TypeError("%s must be a %s%s, not %s" %
                        (name, cls.__name__, " or None" if optional else "",
                         type(value).__name__))
    return value


def _deadline(timeout, name="timeout"):
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
    return lib.hl_deadline_after(int(timeout * 1e9))


def _name(ptr_fn, value):
    return (ptr_fn(value) or b"").decode()


_BACKENDS = {"auto": 0, "host": 1, "hip": 2}
_FALLBACKS = {None: 0, "default": 0, "frontier": 1, "device-sync": 2,
              "ordered": 3}
_ACCESS = {"r": 1, "read": 1, "w": 2, "write": 2, "rw": 3, "read_write": 3}


def _enum_arg(table, value, what):
    if (isinstance(value, int) and not isinstance(value, bool) and
            value in table.values()):
        return value
    try:
        return table[value]
    except (KeyError, TypeError):
        raise _make_error(
            StatusCode.INVALID_ARGUMENT, "unknown %s %r (accepted: %s)" %
            (what, value, ", ".join(str(k) for k in table if k is not None)))

