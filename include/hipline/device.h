// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Backends and devices.
//
// A device is one GPU (hip backend) or one CPU-emulated device (host
// backend). It owns a stream-ordered memory pool, an event pool and the
// fallback reclaimer. Devices are reference counted and thread-safe.
#ifndef HIPLINE_DEVICE_H_
#define HIPLINE_DEVICE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hipline/allocator.h"
#include "hipline/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hl_device_t hl_device_t;

typedef enum hl_backend_kind_e {
  HL_BACKEND_AUTO = 0,  // hip when a device exists, otherwise host.
  HL_BACKEND_HOST = 1,
  HL_BACKEND_HIP = 2,
} hl_backend_kind_t;

// Returns "auto", "host" or "hip".
HL_API const char* hl_backend_kind_name(hl_backend_kind_t kind);

// What one backend can do on this machine.
typedef struct hl_backend_info_t {
  hl_backend_kind_t kind;
  bool available;
  int device_count;
  // Why the backend is unavailable ("libamdhip64.so.5: hipInit returned
  // hipErrorNoDevice"), or "" when it is available.
  char reason[256];
} hl_backend_info_t;

// Probes |kind| (HOST or HIP) without creating a device. Never fails for an
// unavailable backend: |out_info->available| is false with the reason.
HL_API hl_status_t hl_backend_query(hl_backend_kind_t kind,
                                    hl_backend_info_t* out_info);

// Resolves |requested| to a concrete backend. AUTO consults HIPLINE_BACKEND
// (auto|hip|host) and then picks hip when a device exists, host otherwise.
// An explicit request for an unavailable backend is UNAVAILABLE with the
// reason; an invalid HIPLINE_BACKEND is INVALID_ARGUMENT naming it.
HL_API hl_status_t hl_backend_resolve(hl_backend_kind_t requested,
                                      hl_backend_kind_t* out_kind);

// How a root whose last reference drops without a dealloca is freed.
// The fallback runs when the last buffer of a root goes without a dealloca
// (work still in flight keeps the memory until it is done, in every mode).
typedef enum hl_fallback_mode_e {
  HL_FALLBACK_DEFAULT = 0,      // HIPLINE_FALLBACK, else ORDERED.
  HL_FALLBACK_FRONTIER = 1,     // Free once every queue reaches its value at
                                // release time; never blocks the caller.
  HL_FALLBACK_DEVICE_SYNC = 2,  // The releasing thread drains every queue of
                                // the device, then frees (stop-the-world).
  HL_FALLBACK_ORDERED = 3,      // A root whose address never escaped (see
                                // hl_buffer_is_escaped) is freed in queue
                                // order on its affinity queue after every
                                // recorded use; an escaped root takes
                                // FRONTIER. Never blocks the caller.
} hl_fallback_mode_t;

// Returns "ordered", "frontier" or "device-sync" ("default" for DEFAULT).
HL_API const char* hl_fallback_mode_name(hl_fallback_mode_t mode);

// Reuse policies of the stream-ordered pool (as hipMemPoolReuse*).
enum {
  HL_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1u << 0,
  HL_POOL_REUSE_ALLOW_OPPORTUNISTIC = 1u << 1,
  HL_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 1u << 2,
  HL_POOL_REUSE_ALL = 7u,
};

// Pool attributes, as set on a device and reported by it.
typedef struct hl_pool_attributes_t {
  // Bytes the pool keeps reserved when idle; freed blocks beyond this are
  // returned to the system at synchronization points. UINT64_MAX keeps all.
  uint64_t release_threshold;
  uint32_t reuse_flags;  // HL_POOL_REUSE_* bits.
  // Upper bound on reserved bytes (0: the device's memory size).
  uint64_t limit_bytes;
} hl_pool_attributes_t;

// Which allocator serves queue_alloca (HIPLINE_ALLOCATOR).
typedef enum hl_pool_mode_e {
  HL_POOL_MODE_DEFAULT = 0,  // HIPLINE_ALLOCATOR, else HIPLINE.
  HL_POOL_MODE_DRIVER = 1,   // One backend malloc_async per alloca.
  HL_POOL_MODE_HIPLINE = 2,  // hipline's timeline-aware suballocator over
                             // backend slabs (runtime/memory/suballocator.h).
} hl_pool_mode_t;

// Returns "driver" or "hipline" ("default" for DEFAULT).
HL_API const char* hl_pool_mode_name(hl_pool_mode_t mode);

typedef struct hl_device_options_t {
  hl_backend_kind_t backend;  // AUTO: see hl_backend_resolve.
  int ordinal;                // Device index within the backend.
  hl_fallback_mode_t fallback;
  // Each pool field applies only when its |*_set| flag is true; otherwise
  // HIPLINE_POOL_RELEASE_THRESHOLD / the backend default applies.
  hl_pool_attributes_t pool;
  bool pool_release_threshold_set;
  bool pool_reuse_flags_set;
  // -1: HIPLINE_CHECKED decides (default off); 0 or 1 forces it.
  int checked;
  // DEFAULT: HIPLINE_ALLOCATOR decides.
  hl_pool_mode_t pool_mode;
  // Submissions each queue of the device may have in flight before a
  // submitter blocks (see hl_queue_wait_capacity). 0: HIPLINE_QUEUE_DEPTH,
  // else HL_QUEUE_DEPTH_DEFAULT. At most HL_QUEUE_DEPTH_MAX.
  uint32_t queue_depth;
} hl_device_options_t;

#define HL_QUEUE_DEPTH_DEFAULT 1024u
#define HL_QUEUE_DEPTH_MAX (1u << 20)

// Fills |out_options| with defaults (everything from the environment).
HL_API void hl_device_options_initialize(hl_device_options_t* out_options);

// Checks every HIPLINE_* variable this library reads and returns the first
// invalid one (INVALID_ARGUMENT naming the variable, the value and the
// accepted values), or OK.
HL_API hl_status_t hl_environment_check(void);

// Creates a device. Environment values are read here; an invalid one fails
// the creation. The device is released with hl_device_release.
HL_API hl_status_t hl_device_create(const hl_device_options_t* options,
                                    hl_allocator_t host_allocator,
                                    hl_device_t** out_device);
HL_API void hl_device_retain(hl_device_t* device);
// Releases |device|. The last release drains every queue (waits for work in
// flight), then frees the pool, events and streams.
HL_API void hl_device_release(hl_device_t* device);

typedef struct hl_device_properties_t {
  hl_backend_kind_t backend;
  int ordinal;
  char name[256];
  // Target id such as "gfx90a:sramecc+:xnack-", "sm_90" or "host".
  char target[128];
  uint64_t memory_bytes;
  int compute_units;
} hl_device_properties_t;

// Properties of device |ordinal| of |kind| without creating a device.
HL_API hl_status_t hl_backend_device_properties(
    hl_backend_kind_t kind, int ordinal, hl_device_properties_t* out_props);

HL_API hl_status_t hl_device_properties(hl_device_t* device,
                                        hl_device_properties_t* out_props);

// The effective fallback mode and checked flag of |device|.
HL_API hl_fallback_mode_t hl_device_fallback_mode(const hl_device_t* device);
HL_API bool hl_device_checked(const hl_device_t* device);
// The allocator serving queue_alloca on |device| (never DEFAULT).
HL_API hl_pool_mode_t hl_device_pool_mode(const hl_device_t* device);

// Pool attributes in force on |device|.
HL_API hl_status_t hl_device_pool_attributes(hl_device_t* device,
                                             hl_pool_attributes_t* out_attrs);

// Returns pool memory above |min_bytes_to_keep| reserved bytes to the system,
// and destroys the idle events of the device's event pool.
HL_API hl_status_t hl_device_trim(hl_device_t* device,
                                  uint64_t min_bytes_to_keep);

// Number of devices created and not yet destroyed in this process. A device
// outlives its last hl_device_release while queues, buffers or deferred work
// (a queue-ordered free still in flight) hold it; tools and tests that want
// a clean exit can wait for this to reach 0.
HL_API int64_t hl_device_live_count(void);

// Blocks until every queue of |device| has finished all work submitted
// before the call (completed, failed or cancelled: none of it runs after
// this returns OK or a queue failure), or |deadline| passes
// (DEADLINE_EXCEEDED). Every queue is drained even when one has failed; the
// first queue failure is returned.
HL_API hl_status_t hl_device_wait_idle(hl_device_t* device, int64_t deadline);

// Peer access: which device's memory a queue may touch.
//
// A root (hl_queue_alloca, hl_buffer_wrap, ...) belongs to one device, and
// its memory lives there. What reaches it:
// - the queues of its own device, always;
// - the queues of another device B of the same backend once B reaches the
//   root's device A: hl_device_can_access_peer(B, A) is true and
//   hl_device_enable_peer_access was called with both in the set. B's
//   hl_queue_copy then reads and writes A's memory directly (a peer copy on
//   B's stream), B's dispatches (hl_queue_dispatch, user dispatches) may
//   bind A's buffers, and an invocation on B's queue may take A's buffers
//   as arguments and return them as results (imported sync). This covers
//   every allocation of A's stream-ordered pool, made before or after the
//   call, hipline's suballocator slabs included (on hip the pool itself
//   grants B access: hipMemPoolSetAccess; hipDeviceEnablePeerAccess alone
//   does not cover pool memory);
// - nothing else: hl_queue_fill, hl_queue_read, hl_queue_write,
//   hl_queue_native_call and command buffers take buffers of the queue's
//   own device only, and a dispatch on B binding a buffer of a device B
//   does not reach is INVALID_ARGUMENT.
// hl_queue_copy between devices that do not reach each other is staged
// through host memory on queues of each side (counted in
// hl_device_peer_stats; docs/multi-device.md). Every use, direct or staged,
// is recorded on the root's use fence like a local one, so a dealloca, a
// fallback release and the reuse of the root's memory wait for queues of
// other devices too.

// Whether queues of |device| can be given access to the memory of |peer|
// (true when they are the same device). Devices of different backends never
// reach each other. Thread-safe; makes no change.
HL_API hl_status_t hl_device_can_access_peer(hl_device_t* device,
                                             hl_device_t* peer,
                                             bool* out_can_access);

// Enables access between every ordered pair of the |count| devices in
// |devices| that hl_device_can_access_peer allows; a pair that cannot reach
// each other is left as it is (its copies stay staged), and so is a pair
// already enabled. All devices must be of one backend (INVALID_ARGUMENT
// otherwise). Access is never disabled while the devices live. Thread-safe.
HL_API hl_status_t hl_device_enable_peer_access(hl_device_t* const* devices,
                                                size_t count);

// Whether queues of |device| reach the memory of |peer| now (the same
// device, or access enabled). Thread-safe.
HL_API bool hl_device_peer_access_enabled(const hl_device_t* device,
                                          const hl_device_t* peer);

// Cross-device work of one device's queues, counted since its creation.
typedef struct hl_device_peer_stats_t {
  uint64_t peer_copies;    // hl_queue_copy done as one peer copy.
  uint64_t peer_bytes;     // Bytes of those.
  uint64_t staged_copies;  // hl_queue_copy staged through host memory.
  uint64_t staged_bytes;   // Bytes of those.
  // Device-side waits of this device's queues on a signal of another
  // device's queue (a stream waits for another device's event).
  uint64_t cross_device_waits;
} hl_device_peer_stats_t;

HL_API void hl_device_peer_stats(const hl_device_t* device,
                                 hl_device_peer_stats_t* out_stats);

#ifdef __cplusplus
}
#endif

#endif  // HIPLINE_DEVICE_H_
