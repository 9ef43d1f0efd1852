# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Plain data: what a backend, a device, a pool, a queue, an invocation or
a device's copies to and from its peers report."""

from __future__ import annotations

import dataclasses
from typing import Any, Type, TypeVar

__all__ = [
    "AssumeNoAlias", "BackendInfo", "DeviceProperties", "InvocationStats",
    "MemoryStats", "PeerStats", "PoolAttributes", "QueueStats",
]

_D = TypeVar("_D")


def _struct_to(cls: Type[_D], s: Any) -> _D:
    fields = dataclasses.fields(cls)
    return cls(**{f.name: getattr(s, f.name) for f in fields})


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    """What a backend offers here (hipline.backend_query): its `kind`
    ("host", "hip"), whether it is `available`, its `device_count`, and the
    `reason` it is not available ("" when it is)."""

    kind: str
    available: bool
    device_count: int
    reason: str


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """A device's `backend`, `ordinal`, `name`, `target` (its target id,
    e.g. "gfx90a:sramecc+:xnack-", or "host"), `memory_bytes` and
    `compute_units` (Device.properties)."""

    backend: str
    ordinal: int
    name: str
    target: str
    memory_bytes: int
    compute_units: int


@dataclasses.dataclass(frozen=True)
class PoolAttributes:
    """The device pool's `release_threshold` (bytes kept on a trim),
    `reuse_flags` (hipMemPoolReuse* bits) and `limit_bytes` (0: none)."""

    release_threshold: int
    reuse_flags: int
    limit_bytes: int


@dataclasses.dataclass(frozen=True)
class QueueStats:
    """A queue's counters (Queue.stats): submissions, the highest
    `submitted_value` of its timeline, waits issued and elided, submissions
    parked (waiting before a signal exists), failed, and `depth_stalls`."""

    submissions: int
    submitted_value: int
    waits_issued: int
    waits_elided: int
    parked: int
    failed: int
    depth_stalls: int


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    """Memory statistics of a device or a queue (Device.memory_stats,
    Queue.memory_stats), as hl_memory_stats_t: bytes in use and reserved
    with their peaks, alloca/dealloca counts, fallback releases per mode,
    out-of-memory and use-after-free counts, event and stream counts, and
    the pool's slabs, blocks, fragmentation and peak account."""

    bytes_in_use: int
    bytes_in_use_peak: int
    bytes_reserved: int
    bytes_reserved_peak: int
    allocas: int
    deallocas: int
    deallocas_cancelled: int
    fallback_releases_frontier: int
    fallback_releases_device_sync: int
    ooms: int
    use_after_free: int
    command_buffer_executions: int
    fills_elided: int
    fills_shrunk: int
    fill_bytes_elided: int
    events_live: int
    events_pooled: int
    streams_live: int
    fallback_releases_ordered: int
    escaped_roots: int
    fallback_device_sync_owed: int
    pool_slabs: int
    pool_slab_bytes: int
    pool_used_bytes: int
    pool_free_bytes: int
    pool_largest_free_block: int
    pool_fragmentation: float
    pool_pending_free_blocks: int
    pool_slab_allocs: int
    pool_slab_releases: int
    pool_block_reuses: int
    pool_cross_queue_reuses: int
    pool_peak_slab_bytes: int
    pool_peak_requested_bytes: int
    pool_peak_rounding_bytes: int
    pool_peak_tail_bytes: int
    pool_peak_fragment_bytes: int
    pool_peak_free_slab_bytes: int


@dataclasses.dataclass(frozen=True)
class InvocationStats:
    """Counters of the import/export layer (Device.invocation_stats,
    hipline.invocation_stats_global): invocations, results imported async
    and sync, aliases detected, async deallocs and fallback releases per
    mode."""

    invocations: int
    async_imports: int
    sync_imports: int
    alias_detected: int
    async_deallocs: int
    fallback_releases_frontier: int
    fallback_releases_device_sync: int
    fallback_releases_ordered: int


@dataclasses.dataclass(frozen=True)
class PeerStats:
    """Cross-device work of one device's queues since the device was
    created (Device.peer_stats, hl_device_peer_stats): Queue.copy calls
    done as one peer copy (`peer_copies`, `peer_bytes`), those staged
    through host memory because the devices do not reach each other
    (`staged_copies`, `staged_bytes`), and `cross_device_waits`, waits of
    its queues on a signal of another device's queue issued device-side."""

    peer_copies: int
    peer_bytes: int
    staged_copies: int
    staged_bytes: int
    cross_device_waits: int


@dataclasses.dataclass(frozen=True)
class AssumeNoAlias:
    """The assume_no_alias `value` an invocation will use and its `source`:
    "invocation", "api" (ProgramInvocation.global_assume_no_alias) or
    "environment" (HIPLINE_ASSUME_NO_ALIAS)."""

    value: bool
    source: str

