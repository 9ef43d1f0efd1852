# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Traces and memory history (hipline/trace.h): a Chrome trace-event JSON
of submissions, allocas, deallocas and fallback releases that Perfetto
opens, and a PyTorch memory snapshot that memory_viz opens.

    with hipline.trace_capture("run.json"):
        ...                                 # what to trace
    with hipline.memory_history("run.pickle"):
        ...                                 # every alloca and free

Both are process-wide and thread-safe; HIPLINE_TRACE=FILE captures a trace
from the first device to process exit without code.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Optional, Union

from ._args import _int_arg, _str_arg
from ._lib import lib
from .errors import _check

__all__ = [
    "memory_history", "memory_history_begin", "memory_history_dropped",
    "memory_history_end", "trace_capture", "trace_capture_active",
    "trace_capture_begin", "trace_capture_count", "trace_capture_dropped",
    "trace_capture_end",
]

_Path = Union[str, "os.PathLike[str]"]


def _path_arg(path: Optional[_Path], name: str) -> Optional[bytes]:
    if path is None:
        return None
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("%s must be a path or None, not %s" %
                        (name, type(path).__name__))
    return _str_arg(os.fspath(path), name)


def trace_capture_begin(max_events: int = 0) -> None:
    """Starts capturing trace events, keeping at most |max_events| (0: one
    million; later ones are counted as dropped). Discards an earlier
    capture."""
    lib.hl_trace_capture_begin(_int_arg(max_events, "max_events"))


def trace_capture_end(path: Optional[_Path]) -> None:
    """Stops capturing and writes the Chrome trace JSON to |path| (None:
    discards it). PermissionDeniedError names a path that cannot be
    opened, DataLossError a failed write. Without a capture it writes
    nothing."""
    _check(lib.hl_trace_capture_end(_path_arg(path, "path")))


def trace_capture_dropped() -> int:
    """Events dropped beyond the limit by the current or the last
    capture."""
    return int(lib.hl_trace_capture_dropped())


def trace_capture_active() -> bool:
    """True while capturing (False in a build without tracing)."""
    return bool(lib.hl_trace_capture_active())


def trace_capture_count(name: str) -> int:
    """The number of events named |name| captured so far."""
    return int(lib.hl_trace_capture_count(_str_arg(name, "name")))


@contextlib.contextmanager
def trace_capture(path: Optional[_Path],
                  max_events: int = 0) -> Iterator[None]:
    """Captures a trace of the block and writes it to |path| when the
    block ends (None: discards it), even when it raises."""
    path_bytes = _path_arg(path, "path")
    trace_capture_begin(max_events)
    try:
        yield
    finally:
        _check(lib.hl_trace_capture_end(path_bytes))


def memory_history_begin(max_events: int = 0) -> None:
    """Starts recording every alloca's memory and every free of every
    device (PyTorch's torch.cuda.memory._record_memory_history), at most
    |max_events| (0: one million). Discards an earlier history."""
    lib.hl_memory_history_begin(_int_arg(max_events, "max_events"))


def memory_history_end(snapshot_path: Optional[_Path]) -> None:
    """Stops recording and writes the history to |snapshot_path| (None:
    discards it) as a PyTorch memory snapshot pickle ("segments" and
    "device_traces"), which memory_viz opens and
    tools/hipline-trace-convert turns into a replayable log. Errors as
    trace_capture_end's."""
    _check(lib.hl_memory_history_end(_path_arg(snapshot_path,
                                               "snapshot_path")))


def memory_history_dropped() -> int:
    """Events dropped beyond the limit by the current or the last
    history."""
    return int(lib.hl_memory_history_dropped())


@contextlib.contextmanager
def memory_history(snapshot_path: Optional[_Path],
                   max_events: int = 0) -> Iterator[None]:
    """Records the memory history of the block and writes the snapshot to
    |snapshot_path| when the block ends (None: discards it)."""
    path_bytes = _path_arg(snapshot_path, "snapshot_path")
    memory_history_begin(max_events)
    try:
        yield
    finally:
        _check(lib.hl_memory_history_end(path_bytes))

