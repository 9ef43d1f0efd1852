// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The backend contract: one narrow vtable over one device.
//
// Both runtime/backend/host and runtime/backend/hip implement it; the layers
// above (timeline, memory, executable) use nothing else from a backend.
//
// Preconditions shared by every entry point:
// - |backend| is a live object made by the backend's create function;
// - handles passed in were made by the same backend object and not destroyed;
// - every entry is thread-safe unless stated otherwise;
// - no entry may be called from inside a host function running on a stream
//   (HIP forbids API calls from stream callbacks), except where noted, and
//   except on backends with |stream_ordered_host_work| (see hl_backend_t):
//   there the stream operations listed with it may be called from a host
//   function running on |stream| itself, and take effect at that point of
//   the stream;
// - failures are statuses that name the call that failed; a vendor error
//   carries the vendor's error name ("hipErrorOutOfMemory").
//
// Which calls may block the caller (hip backend, as ROCm runs them; the host
// backend blocks only in the synchronizing calls). Host functions on every
// hip stream run on ROCm's one callback thread and hold their stream until
// they return, so a caller that holds a lock a host function needs must not
// make a call that can wait for a stream:
// - always wait for work: stream_synchronize, event_synchronize,
//   stream_destroy, destroy;
// - may wait for work: malloc_async on ROCm builds whose pool waits for a
//   reused block's previous free (clr hip_mempool_impl.cpp, Heap::
//   RemoveMemory -> MemoryTimestamp::Wait), and memcpy_async between two
//   pointers neither of which is a block of this backend (hipMemcpyAsync
//   waits when either side is pageable; copies with one side in a block go
//   through pinned staging and do not wait);
// - enqueue only, but can block when the hardware queue is full behind a
//   host function: every other stream operation;
// - never wait for work: event_query, pool_get_attributes, pool_stats,
//   pool_trim (releases only blocks whose free has completed).
#ifndef HIPLINE_RUNTIME_BACKEND_BACKEND_H_
#define HIPLINE_RUNTIME_BACKEND_BACKEND_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hipline/allocator.h"
#include "hipline/device.h"
#include "hipline/status.h"

typedef struct hl_backend_t hl_backend_t;
// A backend stream handle is the backend's native stream: a hipStream_t on
// hip, the host stream object on the host backend (hl_queue_native_call
// hands it to user code).
typedef struct hl_backend_stream_t hl_backend_stream_t;
typedef struct hl_backend_event_t hl_backend_event_t;
typedef struct hl_backend_module_t hl_backend_module_t;
typedef struct hl_backend_function_t hl_backend_function_t;
typedef struct hl_backend_graph_t hl_backend_graph_t;

// Enqueues the work a graph is made of on |stream| (graph_capture).
typedef hl_status_t (*hl_backend_graph_record_fn_t)(
    void* user, hl_backend_stream_t* stream);

// Runs on the stream's own thread (host) or a driver thread (hip) once all
// earlier work on the stream has completed. It must not block for long and
// must not call into the backend (except as |stream_ordered_host_work|
// allows).
typedef void (*hl_host_fn_t)(void* user);

typedef struct hl_backend_pool_stats_t {
  uint64_t used_bytes;           // Bytes handed out and not yet freed.
  uint64_t used_high_bytes;      // Peak of used_bytes.
  uint64_t reserved_bytes;       // Bytes the pool holds from the system.
  uint64_t reserved_high_bytes;  // Peak of reserved_bytes.
  uint64_t alloc_count;
  uint64_t free_count;
  uint64_t fail_count;   // Allocations that returned out-of-memory.
  uint64_t reuse_count;  // Allocations served from a freed block.
  uint64_t trim_count;   // Blocks returned to the system.
} hl_backend_pool_stats_t;

typedef struct hl_backend_counts_t {
  int64_t live_streams;
  int64_t live_events;
  int64_t live_blocks;  // Allocations not yet freed (used + cached blocks).
  int64_t live_modules;
} hl_backend_counts_t;

typedef struct hl_dim3_t {
  uint32_t x, y, z;
} hl_dim3_t;

typedef struct hl_launch_config_t {
  hl_dim3_t grid;   // In blocks.
  hl_dim3_t block;  // In threads.
  uint32_t shared_bytes;
  // When the launch was issued (hl_time_now), for host kernels that model
  // device time (spin): a kernel starts no earlier than its launch. The
  // host backend fills it when it is 0; the hip backend ignores it.
  int64_t launch_ns;
} hl_launch_config_t;

// A host "code object": the kernels the host backend can launch. The
// executable layer hands this to module_load for a device whose target (in
// query_properties) is "host", as it hands an ELF to a device of target
// "gfx90a": the code object follows from the target, not the kind.
typedef void (*hl_host_kernel_fn_t)(void** params,
                                    const hl_launch_config_t* config);
typedef struct hl_host_kernel_t {
  const char* name;
  hl_host_kernel_fn_t fn;
  uint32_t param_count;
  uint32_t param_sizes[16];  // Bytes of each kernel parameter.
} hl_host_kernel_t;
typedef struct hl_host_code_object_t {
  uint32_t magic;  // HL_HOST_CODE_OBJECT_MAGIC
  uint32_t kernel_count;
  const hl_host_kernel_t* kernels;
} hl_host_code_object_t;
#define HL_HOST_CODE_OBJECT_MAGIC 0x484c484fu  // "HLHO"

typedef struct hl_backend_vtable_t {
  // Destroys the device object. All streams, events and modules must have
  // been destroyed; the pool's memory is returned to the system.
  void (*destroy)(hl_backend_t* backend);

  hl_status_t (*query_properties)(hl_backend_t* backend,
                                  hl_device_properties_t* out_props);

  // Streams execute their work in FIFO order.
  hl_status_t (*stream_create)(hl_backend_t* backend,
                               hl_backend_stream_t** out_stream);
  // Waits for the stream's work to finish, then destroys it.
  void (*stream_destroy)(hl_backend_t* backend, hl_backend_stream_t* stream);
  hl_status_t (*stream_synchronize)(hl_backend_t* backend,
                                    hl_backend_stream_t* stream);
  // Optional: *out_idle is true when every piece of work enqueued on
  // |stream| so far has completed. Does not block. NULL: a caller that
  // would poll waits with stream_synchronize instead.
  hl_status_t (*stream_query)(hl_backend_t* backend,
                              hl_backend_stream_t* stream, bool* out_idle);

  // Events mark a point on a stream. A recorded event completes when the work
  // enqueued on that stream before the record completes. An event never
  // recorded counts as complete.
  hl_status_t (*event_create)(hl_backend_t* backend,
                              hl_backend_event_t** out_event);
  void (*event_destroy)(hl_backend_t* backend, hl_backend_event_t* event);
  hl_status_t (*event_record)(hl_backend_t* backend, hl_backend_event_t* event,
                              hl_backend_stream_t* stream);
  // *out_complete is true when the event has completed. Callable from host
  // functions.
  hl_status_t (*event_query)(hl_backend_t* backend, hl_backend_event_t* event,
                             bool* out_complete);
  hl_status_t (*event_synchronize)(hl_backend_t* backend,
                                   hl_backend_event_t* event);
  hl_status_t (*event_elapsed_ms)(hl_backend_t* backend,
                                  hl_backend_event_t* start,
                                  hl_backend_event_t* end, float* out_ms);
  // Later work on |stream| waits for the event's most recent record as of
  // this call (re-recording the event afterwards does not change the wait).
  hl_status_t (*stream_wait_event)(hl_backend_t* backend,
                                   hl_backend_stream_t* stream,
                                   hl_backend_event_t* event);

  // Runs |fn(user)| in stream order.
  hl_status_t (*launch_host_func)(hl_backend_t* backend,
                                  hl_backend_stream_t* stream, hl_host_fn_t fn,
                                  void* user);
  // Like launch_host_func, for the runtime's own short work (publishing a
  // completion, a pool allocation or free): |fn| takes only leaf locks and
  // never waits for the calling thread, so the backend may run it on the
  // calling thread, before returning, when |stream| has nothing queued or
  // running (the host backend does: an idle device starts it at once; such
  // work never blocks on another stream there, so a pool allocation inline
  // takes no block that waits for another stream's free). Never for user
  // code or long work (kernels, copies). NULL: the runtime uses
  // launch_host_func.
  hl_status_t (*launch_runtime_func)(hl_backend_t* backend,
                                     hl_backend_stream_t* stream,
                                     hl_host_fn_t fn, void* user);
  // Optional, with launch_runtime_func: runs |fn(user)| on the calling
  // thread, before returning, if |stream| has nothing queued or running,
  // and returns whether it did; otherwise enqueues nothing. NULL: never.
  bool (*run_runtime_func_now)(hl_backend_t* backend,
                               hl_backend_stream_t* stream, hl_host_fn_t fn,
                               void* user);
  // Optional, in pairs: while |stream| is idle, claims it for the calling
  // thread until stream_unclaim, so that every runtime function this thread
  // launches on it meanwhile runs at once at the stream's point (as with
  // launch_runtime_func on an idle stream, without a claim each). Anything
  // else enqueued on the stream ends the claim first. Returns whether it
  // claimed; stream_unclaim is called exactly when it did.
  bool (*stream_claim)(hl_backend_t* backend, hl_backend_stream_t* stream);
  void (*stream_unclaim)(hl_backend_t* backend, hl_backend_stream_t* stream);
  // With stream_claim: whether the calling thread's claim on |stream| still
  // holds (nothing was enqueued behind it), so that a runtime function
  // launched now would run at once, at the stream's point.
  bool (*stream_claim_intact)(hl_backend_t* backend,
                              hl_backend_stream_t* stream);

  hl_status_t (*memcpy_async)(hl_backend_t* backend, void* dst, const void* src,
                              size_t size, hl_backend_stream_t* stream);
  // Sets |count| 32-bit words at |dst| (4-byte aligned) to |value|.
  hl_status_t (*memset32_async)(hl_backend_t* backend, void* dst,
                                uint32_t value, size_t count,
                                hl_backend_stream_t* stream);

  // Stream-ordered allocation from the device pool: the memory is usable by
  // work enqueued on |stream| after this call. Out of memory is
  // RESOURCE_EXHAUSTED (the pool is not trimmed here; the caller decides).
  hl_status_t (*malloc_async)(hl_backend_t* backend, size_t size,
                              hl_backend_stream_t* stream, void** out_ptr);
  // Frees in stream order: the block is not reused before the work enqueued
  // on |stream| so far has completed, whatever stream allocated it. (hip:
  // ROCm lets the allocating stream reuse a freed block at once, so a free
  // on another stream is enqueued on the allocating stream after a wait on
  // an event of |stream|; other streams reuse it as the reuse flags allow.
  // A free on a stream with nothing pending has nothing to wait for and
  // is enqueued on |stream| itself, so once |stream| is synchronized the
  // block is free and pool_trim can return it.)
  hl_status_t (*free_async)(hl_backend_t* backend, void* ptr,
                            hl_backend_stream_t* stream);
  hl_status_t (*pool_set_attributes)(hl_backend_t* backend,
                                     const hl_pool_attributes_t* attrs);
  hl_status_t (*pool_get_attributes)(hl_backend_t* backend,
                                     hl_pool_attributes_t* out_attrs);
  // Returns free blocks to the system until at most |min_bytes_to_keep|
  // bytes stay reserved (blocks whose free has not completed are kept).
  hl_status_t (*pool_trim)(hl_backend_t* backend, uint64_t min_bytes_to_keep);
  hl_status_t (*pool_stats)(hl_backend_t* backend,
                            hl_backend_pool_stats_t* out_stats);

  // Loads a code object (host: an hl_host_code_object_t; hip: an ELF or
  // offload bundle for this device's target).
  hl_status_t (*module_load)(hl_backend_t* backend, const void* image,
                             size_t size, hl_backend_module_t** out_module);
  void (*module_unload)(hl_backend_t* backend, hl_backend_module_t* module);
  // The returned function is owned by the module.
  hl_status_t (*module_get_function)(hl_backend_t* backend,
                                     hl_backend_module_t* module,
                                     const char* name,
                                     hl_backend_function_t** out_function);
  // Launches with |params| as in hipModuleLaunchKernel's kernelParams: an
  // array of pointers to each argument. Arguments are copied at launch.
  hl_status_t (*launch_kernel)(hl_backend_t* backend,
                               hl_backend_function_t* function,
                               const hl_launch_config_t* config, void** params,
                               hl_backend_stream_t* stream);

  // Counts of live objects, for leak checks.
  void (*live_counts)(hl_backend_t* backend, hl_backend_counts_t* out_counts);

  // Optional entries: NULL where the backend lacks the capability. Callers
  // test the entry, never the backend's kind.
  //
  // Checked mode (HIPLINE_CHECKED): from now on, freed blocks are poisoned
  // (0xDB bytes) in stream order, so a use after free reads garbage. Only
  // backends that can do this support checked mode (the host backend); on
  // the others the device runs unchecked. A backend with this entry lets
  // host functions on its streams write its memory, so the memory layer
  // poisons the blocks its own suballocator frees, where those frees run in
  // stream order (|stream_ordered_host_work|).
  void (*set_poison)(hl_backend_t* backend, bool poison);

  // Graphs: |record| enqueues device work (memset32_async, memcpy_async
  // between device buffers, launch_kernel; nothing else) on a private
  // stream, which captures it instead of running it; the result is an
  // executable graph of that work, in that order, for this device.
  // graph_launch enqueues all of it on |stream| as one operation; each
  // launch runs the same work again. UNAVAILABLE when the runtime lacks the
  // graph API (the caller then enqueues the work itself).
  hl_status_t (*graph_capture)(hl_backend_t* backend,
                               hl_backend_graph_record_fn_t record, void* user,
                               hl_backend_graph_t** out_graph);
  hl_status_t (*graph_launch)(hl_backend_t* backend, hl_backend_graph_t* graph,
                              hl_backend_stream_t* stream);
  void (*graph_destroy)(hl_backend_t* backend, hl_backend_graph_t* graph);

  // Peers, optional together (NULL: no device reaches another). |peer| is
  // a live backend object of the same kind for another device.
  //
  // Whether work on this device's streams can read and write |peer|'s
  // memory once peer_enable(backend, peer) has returned OK. Makes no change.
  hl_status_t (*peer_can_access)(hl_backend_t* backend, hl_backend_t* peer,
                                 bool* out_can_access);
  // Makes all of |peer|'s memory, present and future, reachable from this
  // device's streams: its stream-ordered pool included (hip:
  // hipDeviceEnablePeerAccess from this device and hipMemPoolSetAccess on
  // |peer|'s pool for this device). Only after peer_can_access said true;
  // a second call for the same pair is OK and changes nothing.
  hl_status_t (*peer_enable)(hl_backend_t* backend, hl_backend_t* peer);
  // Copies |size| bytes from |src|, memory of |src_backend|, to |dst|,
  // memory of |dst_backend|, in order on |stream| of this backend; this
  // device reaches both (each is itself or an enabled peer). A stream
  // operation as memcpy_async is (stream_ordered_host_work included).
  hl_status_t (*memcpy_peer_async)(hl_backend_t* backend, void* dst,
                                   hl_backend_t* dst_backend, const void* src,
                                   hl_backend_t* src_backend, size_t size,
                                   hl_backend_stream_t* stream);
} hl_backend_vtable_t;

struct hl_backend_t {
  const hl_backend_vtable_t* vtable;
  // Which backend this is: for device creation, names in messages and
  // backend-specific tests. The layers above never choose behaviour by it;
  // they read the capabilities below.
  hl_backend_kind_t kind;
  // True when device memory is host memory (the host backend): a fact about
  // the backend for its own code and its tests (external buffers made with
  // malloc). The layers above never read it; what they may rely on is said
  // by the capabilities below.
  bool host_visible_memory;
  // Capabilities (false unless the backend sets them). Each says what the
  // layers above may do on this backend and what each layer gives with and
  // without it; a layer tests the capability, never the kind.
  //
  // - stream_ordered_host_work (host backend; not hip): host functions
  //   launched on a stream run on that stream's own worker, in order with
  //   its other work, at the cost of any other stream item; and a stream
  //   operation (malloc_async, free_async, memcpy_async, memset32_async,
  //   launch_kernel, pool_trim, pool_stats) called from a host function
  //   running on |stream| itself, for |stream|, takes effect at that point of
  //   the stream: a copy, fill or kernel has run when the call returns.
  //   The layers above then do every queue operation's stream work from a
  //   gated host function, when the stream gets there (hl_stream_work_issue
  //   in runtime/timeline/stream_work.h), rather than at issue. The same
  //   backend calls are made either way; what the capability adds:
  //   * cancellation until execution: an operation whose submission failed
  //     by the time the stream reaches it (a wait that failed after it was
  //     issued as a device-side event wait, a failed queue) does nothing;
  //     without the capability only failures known at issue skip it, and a
  //     later failure still fails the submission's signals;
  //   * allocas and deallocas reach the pool in execution order (a
  //     cancelled dealloca leaves the buffer valid, whenever its wait
  //     failed); without it they reach the pool at issue, which stream-
  //     ordered pools make equivalent for work that succeeds;
  //   * root checks (use after free, allocation failed) and checked mode
  //     see the state when the work runs; without it they see it at issue;
  //   * the timeline gates a submission whose waits were not settled at
  //     issue on those waits again when the stream reaches it.
  // - events_untimed: events are made without timing (hip:
  //   hipEventDisableTiming; the host backend models that: a record is
  //   no stream item); event_elapsed_ms fails with UNIMPLEMENTED.
  // - injects_faults: the backend honours HIPLINE_FAULTS stream delays and
  //   allocation failures (the host backend), so tests may count them.
  // - host_functions_serialized: host functions of every stream run on one
  //   thread and hold their stream until they return (hip: ROCm's callback
  //   thread; the marker "Blocks AQL queue" in clr rocvirtual.cpp), so one
  //   that waits on another queue's progress can stall or deadlock it. The
  //   timeline then launches no host function at all: the device's
  //   completer thread waits on (or queries) the submissions' events and
  //   streams, and a queue's step thread runs its host calls once the
  //   stream has reached them (runtime/timeline/device_completer.c).
  //   Backend-internal host functions that touch no hipline state (hip: staging
  //   chunk delivery) remain.
  bool stream_ordered_host_work;
  bool events_untimed;
  bool injects_faults;
  bool host_functions_serialized;
  hl_allocator_t host_allocator;
};

// Creates the backend of |kind| (HL_BACKEND_HOST or HL_BACKEND_HIP; resolve
// HL_BACKEND_AUTO with hl_backend_resolve first) for device |ordinal|. Fills
// *out_backend or returns the backend's status (UNAVAILABLE with the reason).
hl_status_t hl_backend_create(hl_backend_kind_t kind, int ordinal,
                              hl_allocator_t host_allocator,
                              hl_backend_t** out_backend);

// HIPLINE_BACKEND (auto|host|hip) as a kind; HL_BACKEND_AUTO when unset, an
// INVALID_ARGUMENT status naming the accepted values when unknown.
hl_status_t hl_backend_kind_from_env(hl_backend_kind_t* out_kind);

// Backend constructors, called by backend.c only (hl_backend_create,
// hl_backend_query, hl_backend_device_properties dispatch to them). Each
// fills *out_backend or returns UNAVAILABLE with the reason.
hl_status_t hl_host_backend_create(int ordinal, hl_allocator_t allocator,
                                   hl_backend_t** out_backend);
hl_status_t hl_host_backend_query(hl_backend_info_t* out_info);
hl_status_t hl_host_backend_device_properties(int ordinal,
                                              hl_device_properties_t* out);

hl_status_t hl_hip_backend_create(int ordinal, hl_allocator_t allocator,
                                  hl_backend_t** out_backend);
hl_status_t hl_hip_backend_query(hl_backend_info_t* out_info);
hl_status_t hl_hip_backend_device_properties(int ordinal,
                                             hl_device_properties_t* out);

// launch_runtime_func where the backend has it, launch_host_func otherwise.
static inline hl_status_t hl_backend_launch_runtime_func(
    hl_backend_t* backend, hl_backend_stream_t* stream, hl_host_fn_t fn,
    void* user) {
  if (backend->vtable->launch_runtime_func) {
    return backend->vtable->launch_runtime_func(backend, stream, fn, user);
  }
  return backend->vtable->launch_host_func(backend, stream, fn, user);
}

// run_runtime_func_now where the backend has it, false otherwise.
static inline bool hl_backend_run_runtime_func_now(hl_backend_t* backend,
                                                   hl_backend_stream_t* stream,
                                                   hl_host_fn_t fn,
                                                   void* user) {
  return backend->vtable->run_runtime_func_now &&
         backend->vtable->run_runtime_func_now(backend, stream, fn, user);
}

#endif  // HIPLINE_RUNTIME_BACKEND_BACKEND_H_
