# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Loads libhipline.so and declares the C signatures (stdlib ctypes only).

The library is found, in order, at:
1. $LIBHIPLINE (a path to libhipline.so*), for build trees;
2. the path `cmake --install` wrote into _install_paths.py, relative to this
   package;
3. the dynamic loader's search (LD_LIBRARY_PATH, ld.so.cache):
   libhipline.so.0, then ctypes.util.find_library("hipline").
"""

import ctypes
import ctypes.util
import importlib
import os
from typing import Iterator, Tuple

from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double,
                    c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p)

SOVERSION = 0


def _candidates() -> Iterator[str]:
    env = os.environ.get("LIBHIPLINE")
    if env:
        yield env
        return
    try:
        # Written by cmake --install or setup.py.
        _install_paths = importlib.import_module(__package__ +
                                                 "._install_paths")
        here = os.path.dirname(os.path.abspath(__file__))
        yield os.path.normpath(
            os.path.join(here, _install_paths.LIBRARY_DIR,
                         _install_paths.LIBRARY_NAME))
    except ImportError:
        pass
    yield "libhipline.so.%d" % SOVERSION
    found = ctypes.util.find_library("hipline")
    if found:
        yield found


def _load() -> Tuple[ctypes.CDLL, str]:
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError(
        "hipline: cannot load libhipline.so (set LIBHIPLINE to its path, "
        "e.g. build/lib/libhipline.so); tried: " + "; ".join(errors))


lib, library_path = _load()

# Opaque handles are plain pointers; statuses too (OK is NULL -> None).
handle = c_void_p
status_t = c_void_p


class allocator_t(Structure):
    _fields_ = [("self", c_void_p), ("alloc", c_void_p), ("free", c_void_p)]


class pool_attributes_t(Structure):
    _fields_ = [("release_threshold", c_uint64), ("reuse_flags", c_uint32),
                ("limit_bytes", c_uint64)]


class device_options_t(Structure):
    _fields_ = [("backend", c_int), ("ordinal", c_int), ("fallback", c_int),
                ("pool", pool_attributes_t),
                ("pool_release_threshold_set", c_bool),
                ("pool_reuse_flags_set", c_bool), ("checked", c_int),
                ("pool_mode", c_int), ("queue_depth", c_uint32)]


class backend_info_t(Structure):
    _fields_ = [("kind", c_int), ("available", c_bool),
                ("device_count", c_int), ("reason", c_char * 256)]


class device_properties_t(Structure):
    _fields_ = [("backend", c_int), ("ordinal", c_int),
                ("name", c_char * 256), ("target", c_char * 128),
                ("memory_bytes", c_uint64), ("compute_units", c_int)]


class queue_stats_t(Structure):
    _fields_ = [(n, c_uint64) for n in (
        "submissions", "submitted_value", "waits_issued", "waits_elided",
        "parked", "failed", "depth_stalls")]


class memory_stats_t(Structure):
    _fields_ = [(n, c_uint64) for n in (
        "bytes_in_use", "bytes_in_use_peak", "bytes_reserved",
        "bytes_reserved_peak", "allocas", "deallocas", "deallocas_cancelled",
        "fallback_releases_frontier", "fallback_releases_device_sync", "ooms",
        "use_after_free", "command_buffer_executions", "fills_elided",
        "fills_shrunk", "fill_bytes_elided")] + [
        (n, c_int64) for n in ("events_live", "events_pooled", "streams_live")
    ] + [(n, c_uint64) for n in (
        "fallback_releases_ordered", "escaped_roots",
        "fallback_device_sync_owed", "pool_slabs", "pool_slab_bytes",
        "pool_used_bytes", "pool_free_bytes", "pool_largest_free_block")] + [
        ("pool_fragmentation", c_double)] + [(n, c_uint64) for n in (
            "pool_pending_free_blocks", "pool_slab_allocs",
            "pool_slab_releases", "pool_block_reuses",
            "pool_cross_queue_reuses", "pool_peak_slab_bytes",
            "pool_peak_requested_bytes", "pool_peak_rounding_bytes",
            "pool_peak_tail_bytes", "pool_peak_fragment_bytes",
            "pool_peak_free_slab_bytes")]


class device_peer_stats_t(Structure):
    _fields_ = [(n, c_uint64) for n in (
        "peer_copies", "peer_bytes", "staged_copies", "staged_bytes",
        "cross_device_waits")]


class invocation_stats_t(Structure):
    _fields_ = [(n, c_uint64) for n in (
        "invocations", "async_imports", "sync_imports", "alias_detected",
        "async_deallocs", "fallback_releases_frontier",
        "fallback_releases_device_sync", "fallback_releases_ordered")]


class function_signature_t(Structure):
    _fields_ = [("argument_count", c_uint32), ("result_count", c_uint32),
                ("argument_access", POINTER(c_int))]


class kernel_arg_t(Structure):
    _fields_ = [("kind", c_int), ("buffer", c_void_p), ("offset", c_uint64),
                ("length", c_uint64), ("access", c_int), ("scalar", c_uint64),
                ("size", c_uint32)]


class dispatch_config_t(Structure):
    _fields_ = [("grid", c_uint32 * 3), ("block", c_uint32 * 3),
                ("shared_bytes", c_uint32)]


class buffer_binding_t(Structure):
    _fields_ = [("buffer", c_void_p), ("offset", c_uint64),
                ("length", c_uint64), ("access", c_int)]


class code_object_t(Structure):
    _fields_ = [("target", c_char_p), ("data", c_void_p), ("size", c_size_t),
                ("path", c_char_p)]


# Callback types. A CFUNCTYPE callback takes the GIL itself.
fence_reached_fn = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)
queue_host_fn = ctypes.CFUNCTYPE(None, c_void_p)
native_stream_fn = ctypes.CFUNCTYPE(status_t, c_void_p, c_void_p,
                                    POINTER(c_void_p), c_size_t)
function_fn = ctypes.CFUNCTYPE(status_t, c_void_p, c_void_p,
                               POINTER(c_void_p), c_size_t, c_void_p,
                               c_void_p, POINTER(c_void_p), c_size_t)

_SIGNATURES = {
    # status
    "hl_status_code_name": (c_char_p, [c_int]),
    "hl_status_code": (c_int, [status_t]),
    "hl_status_message": (c_char_p, [status_t]),
    "hl_status_source": (c_char_p, [status_t]),
    "hl_status_free": (None, [status_t]),
    "hl_status_clone": (status_t, [status_t]),
    # hl_status_make is variadic: called with (code, file, line, "%s", text).
    "hl_status_make": (status_t, [c_int, c_char_p, c_int, c_char_p, c_char_p]),
    "hl_allocator_system": (allocator_t, []),
    "hl_time_now": (c_int64, []),
    "hl_deadline_after": (c_int64, [c_int64]),
    # devices
    "hl_backend_kind_name": (c_char_p, [c_int]),
    "hl_backend_query": (status_t, [c_int, POINTER(backend_info_t)]),
    "hl_backend_resolve": (status_t, [c_int, POINTER(c_int)]),
    "hl_fallback_mode_name": (c_char_p, [c_int]),
    "hl_device_options_initialize": (None, [POINTER(device_options_t)]),
    "hl_environment_check": (status_t, []),
    "hl_device_create": (status_t, [POINTER(device_options_t), allocator_t,
                                    POINTER(handle)]),
    "hl_device_retain": (None, [handle]),
    "hl_device_release": (None, [handle]),
    "hl_device_properties": (status_t, [handle,
                                        POINTER(device_properties_t)]),
    "hl_device_fallback_mode": (c_int, [handle]),
    "hl_device_checked": (c_bool, [handle]),
    "hl_device_pool_attributes": (status_t, [handle,
                                             POINTER(pool_attributes_t)]),
    "hl_device_trim": (status_t, [handle, c_uint64]),
    "hl_device_live_count": (c_int64, []),
    "hl_device_wait_idle": (status_t, [handle, c_int64]),
    "hl_device_can_access_peer": (status_t, [handle, handle,
                                             POINTER(c_bool)]),
    "hl_device_enable_peer_access": (status_t, [POINTER(handle), c_size_t]),
    "hl_device_peer_access_enabled": (c_bool, [handle, handle]),
    "hl_device_peer_stats": (None, [handle, POINTER(device_peer_stats_t)]),
    # semaphores and fences
    "hl_semaphore_create": (status_t, [c_uint64, allocator_t,
                                       POINTER(handle)]),
    "hl_semaphore_retain": (None, [handle]),
    "hl_semaphore_release": (None, [handle]),
    "hl_semaphore_query": (status_t, [handle, POINTER(c_uint64)]),
    "hl_semaphore_signal": (status_t, [handle, c_uint64]),
    "hl_semaphore_fail": (status_t, [handle, status_t]),
    "hl_semaphore_wait": (status_t, [handle, c_uint64, c_int64]),
    "hl_fence_create": (status_t, [allocator_t, POINTER(handle)]),
    "hl_fence_retain": (None, [handle]),
    "hl_fence_release": (None, [handle]),
    "hl_fence_insert": (status_t, [handle, handle, c_uint64]),
    "hl_fence_join": (status_t, [handle, handle]),
    "hl_fence_clear": (None, [handle]),
    "hl_fence_count": (c_size_t, [handle]),
    "hl_fence_entry": (None, [handle, c_size_t, POINTER(handle),
                              POINTER(c_uint64)]),
    "hl_fence_is_reached": (status_t, [handle, POINTER(c_bool)]),
    "hl_fence_wait": (status_t, [handle, c_int64]),
    "hl_fence_call_when_reached": (status_t, [handle, handle,
                                              fence_reached_fn, c_void_p]),
    # queues
    "hl_queue_create": (status_t, [handle, POINTER(handle)]),
    "hl_queue_retain": (None, [handle]),
    "hl_queue_release": (None, [handle]),
    "hl_queue_device": (handle, [handle]),
    "hl_queue_timeline": (handle, [handle]),
    "hl_queue_id": (c_uint32, [handle]),
    "hl_queue_barrier": (status_t, [handle, handle, handle]),
    "hl_queue_host_call": (status_t, [handle, handle, handle, queue_host_fn,
                                      c_void_p]),
    "hl_queue_wait_idle": (status_t, [handle, c_int64]),
    "hl_queue_status": (status_t, [handle]),
    "hl_queue_stats": (None, [handle, POINTER(queue_stats_t)]),
    # buffers
    "hl_buffer_origin_name": (c_char_p, [c_int]),
    "hl_queue_alloca": (status_t, [handle, handle, handle, c_uint64, c_uint32,
                                   POINTER(handle)]),
    "hl_queue_dealloca": (status_t, [handle, handle, handle, handle]),
    "hl_buffer_subview": (status_t, [handle, c_uint64, c_uint64,
                                     POINTER(handle)]),
    "hl_buffer_retain": (None, [handle]),
    "hl_buffer_release": (None, [handle]),
    "hl_buffer_register_global": (status_t, [handle]),
    "hl_buffer_unregister_global": (status_t, [handle]),
    "hl_buffer_length": (c_uint64, [handle]),
    "hl_buffer_offset": (c_uint64, [handle]),
    "hl_buffer_origin": (c_int, [handle]),
    "hl_buffer_device": (handle, [handle]),
    "hl_buffer_root_id": (c_uint64, [handle]),
    "hl_buffer_device_pointer": (c_void_p, [handle]),
    "hl_buffer_is_freed": (c_bool, [handle]),
    "hl_buffer_use_fence": (status_t, [handle, handle]),
    "hl_buffer_mutation_barrier": (status_t, [handle, handle]),
    "hl_queue_fill": (status_t, [handle, handle, handle, handle, c_uint64,
                                 c_uint64, c_uint32]),
    "hl_queue_copy": (status_t, [handle, handle, handle, handle, c_uint64,
                                 handle, c_uint64, c_uint64]),
    "hl_queue_read": (status_t, [handle, handle, handle, handle, c_uint64,
                                 c_void_p, c_uint64]),
    "hl_queue_write": (status_t, [handle, handle, handle, c_void_p, handle,
                                  c_uint64, c_uint64]),
    "hl_device_memory_stats": (status_t, [handle, POINTER(memory_stats_t)]),
    "hl_queue_memory_stats": (status_t, [handle, POINTER(memory_stats_t)]),
    "hl_device_reset_peak_memory_stats": (status_t, [handle]),
    # functions and invocations
    "hl_function_create": (status_t, [c_char_p,
                                      POINTER(function_signature_t),
                                      function_fn, c_void_p, allocator_t,
                                      POINTER(handle)]),
    "hl_function_retain": (None, [handle]),
    "hl_function_release": (None, [handle]),
    "hl_function_name": (c_char_p, [handle]),
    "hl_function_register": (status_t, [handle]),
    "hl_function_unregister": (status_t, [c_char_p]),
    "hl_function_lookup": (status_t, [c_char_p, POINTER(handle)]),
    "hl_invocation_create": (status_t, [handle, handle, POINTER(handle)]),
    "hl_invocation_release": (None, [handle]),
    "hl_invocation_add_argument": (status_t, [handle, handle]),
    "hl_invocation_add_wait": (status_t, [handle, handle, c_uint64]),
    "hl_invocation_set_assume_no_alias": (None, [handle, c_bool]),
    "hl_invocation_assume_no_alias": (c_bool, [handle]),
    "hl_setting_source_name": (c_char_p, [c_int]),
    "hl_invocation_effective_assume_no_alias": (status_t, [
        handle, POINTER(c_bool), POINTER(c_int)]),
    "hl_set_assume_no_alias": (None, [c_int]),
    "hl_get_assume_no_alias": (status_t, [POINTER(c_int), POINTER(c_int)]),
    "hl_invocation_invoke": (status_t, [handle]),
    "hl_invocation_signal_fence": (handle, [handle]),
    "hl_invocation_result_count": (c_size_t, [handle]),
    "hl_invocation_take_result": (status_t, [handle, c_size_t,
                                             POINTER(handle)]),
    "hl_device_invocation_stats": (status_t, [handle,
                                              POINTER(invocation_stats_t)]),
    "hl_invocation_stats_global": (None, [POINTER(invocation_stats_t)]),
    # kernels
    "hl_queue_dispatch": (status_t, [handle, handle, handle, c_char_p,
                                     POINTER(dispatch_config_t), c_size_t,
                                     POINTER(kernel_arg_t)]),
    "hl_pattern_value": (c_uint32, [c_uint32, c_uint64]),
    "hl_dispatch_kernel_count": (c_size_t, []),
    "hl_dispatch_kernel_name": (c_char_p, [c_size_t]),
    "hl_queue_fill_pattern": (status_t, [handle, handle, handle, handle,
                                         c_uint32]),
    "hl_queue_verify_pattern": (status_t, [handle, handle, handle, handle,
                                           c_uint32, handle]),
    "hl_queue_spin": (status_t, [handle, handle, handle, c_uint64]),
    "hl_kernels_register_functions": (status_t, []),
    # traces and memory history
    "hl_trace_capture_begin": (None, [c_uint64]),
    "hl_trace_capture_end": (status_t, [c_char_p]),
    "hl_trace_capture_dropped": (c_uint64, []),
    "hl_trace_capture_active": (c_bool, []),
    "hl_trace_capture_count": (c_uint64, [c_char_p]),
    "hl_memory_history_begin": (None, [c_uint64]),
    "hl_memory_history_end": (status_t, [c_char_p]),
    "hl_memory_history_dropped": (c_uint64, []),
    # user executables
    "hl_executable_create": (status_t, [c_size_t, POINTER(code_object_t),
                                        POINTER(handle)]),
    "hl_executable_retain": (None, [handle]),
    "hl_executable_release": (None, [handle]),
    "hl_executable_object_count": (c_size_t, [handle]),
    "hl_executable_object_target": (c_char_p, [handle, c_size_t]),
    "hl_executable_select_for_device": (status_t, [handle, handle,
                                                   POINTER(c_size_t)]),
    "hl_executable_kernel_arg_count": (status_t, [handle, c_size_t, c_char_p,
                                                  POINTER(c_size_t)]),
    "hl_queue_native_call": (status_t, [handle, handle, handle,
                                        native_stream_fn, c_void_p, c_size_t,
                                        POINTER(buffer_binding_t)]),
    "hl_queue_dispatch_executable": (status_t, [
        handle, handle, handle, handle, c_char_p, POINTER(dispatch_config_t),
        c_size_t, POINTER(kernel_arg_t)]),
}

for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _fn = getattr(lib, _name)  # AttributeError names a missing export.
    _fn.restype = _restype
    _fn.argtypes = _argtypes

__all__ = ["lib", "library_path"]
del _name, _restype, _argtypes, _fn
