"""Status codes and the exceptions that carry them."""

import enum

from ._lib import lib



class StatusCode(enum.IntEnum):
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

    code = StatusCode.UNKNOWN

    def __init__(self, code, message=None, source=""):
        if message is None and isinstance(code, str):
            code, message = type(self).code, code
        self.code = StatusCode(code)
        self.message = message
        self.source = source
        super().__init__("%s: %s" % (self.code.name, message))


def _error_class_name(code):
    return "".join(p.capitalize() for p in code.name.split("_")) + "Error"


_ERROR_CLASSES = {}
for _code in StatusCode:
    if _code is StatusCode.OK:
        continue
    # Bad arguments are also ValueErrors, as Python code expects.
    _bases = ((Error, ValueError) if _code in (StatusCode.INVALID_ARGUMENT,
                                               StatusCode.OUT_OF_RANGE)
              else (Error,))
    _cls = type(_error_class_name(_code), _bases, {"code": _code})
    _cls.__module__ = __name__
    globals()[_cls.__name__] = _cls
    _ERROR_CLASSES[_code] = _cls
del _code, _cls, _bases


def _make_error(code, message, source=""):
    cls = _ERROR_CLASSES.get(code, Error)
    return cls(code, message, source)


def _status_error(status, free):
    """Turns a non-OK status pointer into an Error (freeing it if |free|)."""
    code = lib.hl_status_code(status)
    message = (lib.hl_status_message(status) or b"").decode("utf-8", "replace")
    source = (lib.hl_status_source(status) or b"").decode("utf-8", "replace")
    if free:
        lib.hl_status_free(status)
    return _make_error(code, message, source)


def _check(status):
    if status:
        raise _status_error(status, True)


def _status_from_exception(exc, context):
    """A new hl_status_t (owned by the caller) describing |exc|."""
    if isinstance(exc, Error):
        code, text = exc.code, "%s: %s" % (context, exc.message)
    else:
        code = StatusCode.INTERNAL
        text = "%s: %s: %s" % (context, type(exc).__name__, exc)
    return lib.hl_status_make(int(code), b"python", 0, b"%s",
                              text.encode("utf-8", "replace"))


def _closed(what):
    return _make_error(StatusCode.FAILED_PRECONDITION,
                       "%s is closed (already released)" % what)

