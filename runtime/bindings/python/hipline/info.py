"""Plain data: what a backend, a device, a pool, a queue or an invocation
reports."""

import dataclasses



def _struct_to(cls, s):
    return cls(**{f.name: getattr(s, f.name) for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    kind: str
    available: bool
    device_count: int
    reason: str


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    backend: str
    ordinal: int
    name: str
    target: str
    memory_bytes: int
    compute_units: int


@dataclasses.dataclass(frozen=True)
class PoolAttributes:
    release_threshold: int
    reuse_flags: int
    limit_bytes: int


@dataclasses.dataclass(frozen=True)
class QueueStats:
    submissions: int
    submitted_value: int
    waits_issued: int
    waits_elided: int
    parked: int
    failed: int
    depth_stalls: int


@dataclasses.dataclass(frozen=True)
class MemoryStats:
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
    invocations: int
    async_imports: int
    sync_imports: int
    alias_detected: int
    async_deallocs: int
    fallback_releases_frontier: int
    fallback_releases_device_sync: int
    fallback_releases_ordered: int


@dataclasses.dataclass(frozen=True)
class AssumeNoAlias:
    """The value an invocation will use and where it comes from:
    "invocation", "api" (ProgramInvocation.global_assume_no_alias) or
    "environment" (HIPLINE_ASSUME_NO_ALIAS)."""
    value: bool
    source: str

