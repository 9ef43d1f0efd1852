"""Handles: released once, deterministically or by the GC."""

import os
import threading

from .errors import StatusCode, _check, _closed, _make_error


_tls = threading.local()  # .runtime_thread: inside a callback from hipline.
_graveyard = []  # (release_fn, ptr) dropped on a hipline thread.
_graveyard_lock = threading.Lock()
_handle_lock = threading.Lock()
_forked = [False]  # In a child forked from a process that loaded hipline.


def _after_fork_in_child():
    _forked[0] = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_not_forked():
    if _forked[0]:
        raise _make_error(
            StatusCode.FAILED_PRECONDITION,
            "hipline cannot be used in a process forked (os.fork) from one "
            "that loaded it: the runtime's threads did not survive the fork "
            "(use multiprocessing's 'spawn' or 'forkserver' start method)")


def _on_runtime_thread():
    return getattr(_tls, "runtime_thread", False)


def _drain_graveyard():
    if not _graveyard or _on_runtime_thread() or _forked[0]:
        return
    with _graveyard_lock:
        items = list(_graveyard)
        _graveyard.clear()
    for release, ptr in items:
        release(ptr)


def _release_ptr(release, ptr):
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

    def __init__(self, handle):
        self.handle = handle

    def __enter__(self):
        return self.handle._acquire()

    def __exit__(self, *exc):
        self.handle._unuse()


class _Handle:
    """Owns one reference to a C object.

    Every call into C that passes the pointer holds a *use* (`_acquire` /
    `_unuse`, or `_call`); `close()` from any thread takes the pointer away
    at once (later uses raise FailedPreconditionError) and the C release
    happens when the last use in flight ends."""

    _release = None  # The C release function.
    _kind = "handle"
    _ptr = None
    _uses = 0
    _doomed = None  # Pointer closed while uses were in flight.

    def __init__(self, ptr):
        self._ptr = ptr

    @classmethod
    def _adopt(cls, ptr, *args):
        obj = cls.__new__(cls)
        _Handle.__init__(obj, ptr)
        obj._init_borrowed(*args)
        return obj

    def _init_borrowed(self, *args):
        pass

    def _acquire(self):
        _check_not_forked()
        with _handle_lock:
            ptr = self._ptr
            if ptr is None:
                raise _closed(self._kind)
            self._uses += 1
        return ptr

    def _unuse(self):
        with _handle_lock:
            self._uses -= 1
            ptr = None
            if self._uses == 0 and self._doomed is not None:
                ptr, self._doomed = self._doomed, None
        if ptr is not None:
            _release_ptr(type(self)._release, ptr)

    def _use(self):
        return _Use(self)

    @property
    def _p(self):
        # Only for pointers handed straight to a borrow (the caller holds a
        # use of another handle that keeps the object alive).
        _check_not_forked()
        ptr = self._ptr
        if ptr is None:
            raise _closed(self._kind)
        return ptr

    @property
    def closed(self):
        return self._ptr is None

    def close(self):
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._ptr is None else "0x%x" % self._ptr
        return "<hipline.%s %s>" % (type(self).__name__, state)

    def __del__(self):
        ptr = self.__dict__.get("_ptr")
        if ptr is None:
            return
        self._ptr = None
        try:
            _release_ptr(type(self)._release, ptr)
        except Exception:  # Interpreter shutdown: nothing left to do.
            pass


def _call(fn, *args):
    """fn(*args) with every _Handle argument replaced by its pointer, each
    held in use for the call."""
    held = []
    try:
        cargs = []
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


def _ccall(fn, *args):
    """_call, raising the returned status."""
    _check(_call(fn, *args))

