// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Internals of the memory layer: roots, buffers, timeline resources and the
// fallback reclaimer.
//
// Files: state.c (a device's memory state, its pool and statistics),
// root.c (roots), buffer.c (buffer views), alloca.c (the alloca op),
// release.c (the dealloca op, a root's last references and the fallback
// release: one file, because the fallback frees with a dealloca and a
// failed dealloca can hand a root to the fallback), transfer.c,
// peer_copy.c (copies between devices),
// suballocator.c (and suballocator_account.c, its reports). No circle of
// files (tools/check_circles.py).
#ifndef HIPLINE_RUNTIME_MEMORY_MEMORY_INTERNAL_H_
#define HIPLINE_RUNTIME_MEMORY_MEMORY_INTERNAL_H_

#include "hipline/buffer.h"
#include "runtime/base/recycler.h"
#include "runtime/base/spin.h"
#include "runtime/memory/suballocator.h"
#include "runtime/timeline/stream_work.h"
#include "runtime/timeline/timeline_internal.h"

typedef enum hl_root_state_e {
  HL_ROOT_PENDING = 0,  // Alloca not issued yet (no memory).
  HL_ROOT_LIVE = 1,     // Memory valid.
  HL_ROOT_FREED = 2,    // Memory returned; any later use is a use-after-free.
  HL_ROOT_FAILED = 3,   // The alloca failed; there never was memory.
} hl_root_state_t;

typedef enum hl_root_memory_e {
  HL_ROOT_MEMORY_POOL = 0,      // From the device's stream-ordered pool.
  HL_ROOT_MEMORY_EXTERNAL = 1,  // Owned elsewhere; release_fn gives it back.
} hl_root_memory_t;

// Who freed a root: |what| is static; |queue_id| is UINT32_MAX when no
// submission did.
typedef struct hl_root_freer_t {
  const char* what;
  uint32_t queue_id;
  uint64_t value;
} hl_root_freer_t;

// The op of the alloca that made an ASYNC root, embedded in the root: a root
// has at most one, and outlives it (the op borrows or holds a reference on
// its root). Its release recycles nothing.
typedef struct hl_alloca_op_t {
  hl_op_t base;
  // An operation reference until the submission completes, once |owns_root|;
  // until then borrowed from hl_queue_alloca (the buffer it returns).
  struct hl_root_t* root;
  bool owns_root;
  uint32_t queue_id;
  uint64_t value;            // The alloca's submission on its queue.
  hl_semaphore_t* timeline;  // The queue's (borrowed while in flight).
  hl_device_t* device;
  hl_backend_stream_t* stream;
  hl_gated_t gate;
  // How many timepoints of the queue's wait frontier, when the alloca was
  // issued, |root->alloca_cover| holds (hipline's pool): blocks whose free
  // it covers are reused.
  size_t cover_count;
} hl_alloca_op_t;

// A dealloca's op. The first dealloca of a root uses the one embedded in the
// root (hl_root_t.dealloca_op, like its alloca's op: the root outlives it);
// another (after a cancelled one) takes a recycled one.
typedef struct hl_dealloca_op_t {
  hl_op_t base;
  // An operation reference once |owns_root|; until then borrowed from the
  // caller of hl_root_dealloca_as.
  struct hl_root_t* root;
  bool owns_root;
  bool frees;  // ASYNC pool root: free on the stream.
  // The cancel check ran (at most once), or the free did (which settles it).
  atomic_bool settled;
  uint32_t queue_id;
  uint64_t value;
  hl_semaphore_t* timeline;  // The queue's (borrowed while in flight).
  hl_backend_stream_t* stream;
  hl_gated_t gate;
  const char* what;    // "queue_dealloca" or the fallback that scheduled it.
  uint64_t signal_id;  // The first signal of the submission (0: none).
  uint64_t signal_value;
} hl_dealloca_op_t;

typedef struct hl_root_t {
  // Low 32 bits: every reference. High 32 bits: the subset held by in-flight
  // operations. One word, so uniqueness checks read a consistent pair.
  _Atomic uint64_t refs;
  uint64_t id;
  hl_device_t* device;         // Retained.
  hl_queue_t* affinity_queue;  // Retained; frees run on its stream.
  hl_root_memory_t memory;
  _Atomic int origin;  // hl_buffer_origin_t.
  _Atomic int state;   // hl_root_state_t.
  // Why the alloca failed or was cancelled (owned), written once before
  // |state| becomes HL_ROOT_FAILED: users of the root fail with it, so a
  // consumer reports its producer's failure, not a missing allocation.
  hl_status_t alloc_failure;
  uint64_t size;
  _Atomic(void*) ptr;
  hl_buffer_release_fn_t release_fn;
  void* release_user;
  atomic_bool dealloca_scheduled;
  // The address left hipline's sight (sticky; see hl_buffer_device_pointer).
  atomic_bool escaped;
  // The fallback took over when the last buffer went (at most once).
  atomic_bool fallback_started;
  // A use beyond the alloca's own was recorded (hl_root_record_use; set
  // under |lock| before the fences change, never cleared). While it is
  // unset, every use is the alloca's, on the affinity queue's timeline, so
  // a dealloca on that queue has no use to wait for and skips |lock|.
  atomic_bool uses_recorded;
  // Timeline resource; guarded by |lock| (short sections: fence edits).
  hl_spinlock_t lock;
  hl_fence_t* use_fence;         // &use_fence_storage.
  hl_fence_t* mutation_barrier;  // &mutation_barrier_storage.
  // Who freed the memory, for use-after-free reports (|lock|), formatted
  // only when one is reported: a static description ("queue_dealloca", a
  // fallback), and the queue and submission value when a dealloca freed it
  // (queue UINT32_MAX otherwise).
  hl_root_freer_t freed_by;
  // The suballocator's block (HL_POOL_MODE_HIPLINE), or NULL.
  hl_suballocation_t* suballocation;
  // Timepoint of the dealloca that frees the memory, set just before the
  // free (NULL timeline: every use is complete, as for fallback releases).
  hl_semaphore_t* free_timeline;
  uint32_t free_queue_id;
  uint64_t free_value;
  // A signal of that dealloca (semaphore id, value; id 0: none), so that
  // an alloca whose queue waited for it may reuse the memory at once.
  uint64_t free_signal_id;
  uint64_t free_signal_value;
  // The alloca's op (ASYNC roots; hl_queue_alloca), and the op of the first
  // dealloca (|dealloca_op_taken|, set once by the dealloca that wins
  // |dealloca_scheduled|).
  hl_alloca_op_t alloca_op;
  hl_dealloca_op_t dealloca_op;
  atomic_bool dealloca_op_taken;
  // Embedded: no fence allocation per root. From here on a recycled root is
  // not zeroed: hl_root_create initialises the fences (their entries beyond
  // the count are not read), and an alloca's issue writes |alloca_cover|
  // before it is read.
  hl_fence_t use_fence_storage;
  hl_fence_t mutation_barrier_storage;
  hl_timepoint_id_t alloca_cover[HL_QUEUE_FRONTIER_CAPACITY];
} hl_root_t;

// A token shared by the views of one import: when the last view holding it
// goes, |on_last_release| runs (the invocation layer schedules the dealloca).
typedef struct hl_buffer_token_t {
  atomic_int ref_count;
  void (*on_last_release)(struct hl_buffer_token_t* token);
} hl_buffer_token_t;

struct hl_buffer_t {
  atomic_int ref_count;
  hl_root_t* root;  // Retained.
  uint64_t offset;
  uint64_t length;
  hl_buffer_token_t* token;  // Retained; NULL unless imported async.
};

static inline hl_root_t* hl_buffer_root(const hl_buffer_t* buffer) {
  return buffer->root;
}

// Marks |root| as having uses beyond its alloca's (hl_root_t.uses_recorded).
// Its lock held, before its fences change.
static inline void hl_root_note_use_locked(hl_root_t* root) {
  atomic_store_explicit(&root->uses_recorded, true, memory_order_relaxed);
}

// Creates an ASYNC pool root with affinity to |queue| (state PENDING) and
// its buffer, which holds the root's one reference.
hl_status_t hl_root_create_async(hl_queue_t* queue, uint64_t size,
                                 hl_buffer_t** out_buffer);
void hl_root_retain(hl_root_t* root);
void hl_root_release(hl_root_t* root);
// References held by queue operations until their submission completes.
void hl_root_retain_for_op(hl_root_t* root);
void hl_root_release_for_op(hl_root_t* root);
// hl_root_release_for_op unless it would drop the root's last reference;
// returns whether it released. Any thread, any lock held.
bool hl_root_release_for_op_unless_last(hl_root_t* root);
// Reads the reference counts (total and in-flight-op) in one load.
void hl_root_ref_snapshot(hl_root_t* root, uint32_t* out_total,
                          uint32_t* out_ops);
// Schedules the queue-ordered free of |root| (see hl_queue_dealloca).
hl_status_t hl_root_dealloca(hl_queue_t* queue, const hl_fence_t* wait_fence,
                             const hl_fence_t* signal_fence, hl_root_t* root);

// Creates a view of |root| [offset, offset+length) carrying |token| (may be
// NULL; retained).
hl_status_t hl_buffer_create_view(hl_root_t* root, uint64_t offset,
                                  uint64_t length, hl_buffer_token_t* token,
                                  hl_buffer_t** out_buffer);

// Records a use of |root| at |queue|@|value| in its timeline resource;
// |write| also moves the mutation barrier there.
// hl_root_record_first_use: the alloca's write, recorded while the root is
// reachable only through its alloca (its buffer not yet returned), so
// without the root's lock; whoever gets the buffer later is ordered after
// it by whatever handed the buffer over.
void hl_root_record_first_use(hl_root_t* root, hl_queue_t* queue,
                              uint64_t value);
void hl_root_record_use(hl_root_t* root, hl_queue_t* queue, uint64_t value,
                        bool write);

// Marks the root freed by |who| (later uses are use-after-free) and then
// returns its memory in stream order on |stream|. Must not run on a stream
// callback, except as stream work of |stream| (hl_stream_work_issue).
// A dealloca's free (|who| names its queue) is counted as one with the
// freed bytes (HL_MEMORY_EVENT_DEALLOCA) when it succeeds.
hl_status_t hl_root_free_memory(hl_root_t* root, hl_backend_stream_t* stream,
                                hl_root_freer_t who);
// The two halves of hl_root_free_memory: mark (false if it was not live) and
// return the memory to the pool or the external owner.
bool hl_root_mark_freed(hl_root_t* root, hl_root_freer_t who);
// Marks a pending root's allocation failed with |status| (borrowed; a copy
// is kept for its users). Once; later calls and live roots are ignored.
void hl_root_fail_allocation(hl_root_t* root, hl_status_t status);
// A freer with no submission: |what| must be a static string.
static inline hl_root_freer_t hl_root_freer(const char* what) {
  hl_root_freer_t who = {what, UINT32_MAX, 0};
  return who;
}
hl_status_t hl_root_return_memory(hl_root_t* root, hl_backend_stream_t* stream);

// Returns the use-after-free status for an operation described by |what| on
// |root|, or NULL when the root is live.
hl_status_t hl_root_check_live(hl_root_t* root, const char* what);

// For operations about to touch |root| in stream order: returns true when it
// is live; otherwise fails |submission| with hl_root_check_live's status and
// returns false. A use after free also fails the queue in |checked| mode; a
// use of memory whose allocation failed only fails the submission (the
// alloca's failure is the cause, already reported on its own signal).
bool hl_root_check_use(hl_root_t* root, const char* what,
                       hl_submission_t* submission, bool checked);

// Per-device memory state (the device's HL_DEVICE_EXTENSION_MEMORY slot).
typedef struct hl_fallback_t hl_fallback_t;
typedef struct hl_memory_state_t {
  // The fallback's lists below (|owed|, |deferred_*|) and the suballocator's
  // creation.
  mtx_t mutex;
  // |stats| and |per_queue|: every alloca and dealloca notes its events
  // under it, so it is a spin lock (base/spin.h). It is also hipline's
  // suballocator's lock (hl_suballocator_create), so an alloca or a free
  // served by it is counted in the same critical section.
  hl_spinlock_t stats_lock;
  // DEVICE_SYNC releases whose drain is owed (see hl_memory_pay_owed_drains).
  hl_fallback_t* owed;
  atomic_uint owed_count;
  // Deferred frontier releases, oldest first, with one notification armed on
  // the oldest while |deferred_armed|.
  hl_fallback_t* deferred_head;
  hl_fallback_t* deferred_tail;
  bool deferred_armed;
  hl_memory_stats_t stats;
  // The driver pool's reserved-bytes peak since the last
  // hl_device_reset_peak_memory_stats (|reserved_peak_reset|): the driver's
  // high-water mark counts once it passes |reserved_high_at_reset|, its
  // value then; until it does, the largest reserved size seen since
  // (|reserved_seen|, sampled by every statistics query). Under
  // |stats_lock|.
  // The device's memory track in traces (hl_trace_memory), and its device.
  uint32_t trace_track;
  hl_device_t* device;
  bool reserved_peak_reset;
  uint64_t reserved_high_at_reset;
  uint64_t reserved_seen;
  hl_memory_stats_t* per_queue;  // Indexed by queue id.
  uint32_t per_queue_capacity;
  // hipline's suballocator (HL_POOL_MODE_HIPLINE), created on first use.
  _Atomic(hl_suballocator_t*) suballocator;
} hl_memory_state_t;

// The pool behind queue_alloca (runtime/memory/state.c): the driver's pool or
// hipline's suballocator, as the device's pool mode says.
// Allocates |root|'s memory for the alloca at |timeline|@|value| of queue
// |queue_id| on |stream|; trims and retries once when out of memory. With
// hipline's suballocator, a block freed on another queue is reused when
// |cover| (the alloca's queue's wait frontier; NULL: none) orders the
// alloca after its free.
hl_status_t hl_memory_pool_alloc(hl_root_t* root, hl_backend_stream_t* stream,
                                 uint32_t queue_id, hl_semaphore_t* timeline,
                                 uint64_t value,
                                 const hl_suballoc_cover_t* cover,
                                 void** out_ptr);
// hl_memory_pool_alloc where that needs no backend call: hipline's
// suballocator, already made, serving the request from free space; the
// alloca is counted (HL_MEMORY_EVENT_ALLOCA) in the same critical section.
// Returns false, changing nothing, otherwise (the driver's pool, growth, no
// suballocator yet). Any lock but the statistics' may be held.
bool hl_memory_pool_try_alloc(hl_root_t* root, uint32_t queue_id,
                              void** out_ptr);
// Whether hl_memory_pool_free of |root| makes no backend call (its memory is
// a suballocation).
static inline bool hl_memory_pool_frees_locally(const hl_root_t* root) {
  return root->suballocation != NULL;
}
// Returns |root|'s suballocation on |stream| at the root's free timepoint
// and counts it: its bytes leave the statistics (on queue |affinity|)
// whether or not the pool took them back, and a dealloca of queue
// |dealloca_queue| (UINT32_MAX: none) is counted when it did.
hl_status_t hl_memory_pool_free(hl_root_t* root, hl_backend_stream_t* stream,
                                uint32_t affinity, uint32_t dealloca_queue);
// Bytes in use and reserved by the pool of |device| (for messages).
void hl_memory_pool_usage(hl_device_t* device, uint64_t* out_used,
                          uint64_t* out_reserved);
// Fills the reserved bytes and the suballocator fields of |out|.
hl_status_t hl_memory_pool_fill_stats(hl_device_t* device,
                                      hl_memory_stats_t* out);
// Destroys the suballocator of |state| (device teardown).
void hl_memory_pool_deinitialize(hl_memory_state_t* state);
// The suballocator of |device| (NULL in driver mode or on failure).
hl_suballocator_t* hl_memory_pool_suballocator(hl_device_t* device);

hl_status_t hl_memory_state(hl_device_t* device, hl_memory_state_t** out_state);
// |device|'s memory state if it was created, else NULL (no lock).
static inline hl_memory_state_t* hl_memory_state_get(hl_device_t* device) {
  return (hl_memory_state_t*)hl_device_extension(device,
                                                 HL_DEVICE_EXTENSION_MEMORY);
}

// Adjusts the statistics of |device| (and of queue |queue_id| when not
// UINT32_MAX) under |stats_lock|.
typedef enum hl_memory_event_e {
  HL_MEMORY_EVENT_ALLOCA,
  HL_MEMORY_EVENT_DEALLOCA,
  HL_MEMORY_EVENT_DEALLOCA_CANCELLED,
  HL_MEMORY_EVENT_FREE_BYTES,
  HL_MEMORY_EVENT_FALLBACK_FRONTIER,
  HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC,
  HL_MEMORY_EVENT_FALLBACK_ORDERED,
  HL_MEMORY_EVENT_FALLBACK_DEVICE_SYNC_OWED,
  HL_MEMORY_EVENT_ESCAPE,
  HL_MEMORY_EVENT_OOM,
  HL_MEMORY_EVENT_USE_AFTER_FREE,
} hl_memory_event_t;
void hl_memory_note(hl_device_t* device, uint32_t queue_id,
                    hl_memory_event_t event, uint64_t bytes);
// hl_memory_note with |state->stats_lock| held (hl_memory_state_t).
struct hl_memory_state_t;
void hl_memory_note_locked(struct hl_memory_state_t* state, uint32_t queue_id,
                           hl_memory_event_t event, uint64_t bytes);
// Two events under one lock.
void hl_memory_note_two(hl_device_t* device, uint32_t queue_a,
                        hl_memory_event_t event_a, uint64_t bytes_a,
                        uint32_t queue_b, hl_memory_event_t event_b,
                        uint64_t bytes_b);

// Memory counter samples for the trace (runtime/memory/memory_trace.c), taken
// after an alloca's or a free's statistics change; nothing unless a trace is
// recording. The _locked form runs under |stats_lock| with the suballocator
// (whose slabs are the reserved bytes); the other takes the lock, and asks
// the driver's pool for its reserved bytes when there is no suballocator.
uint32_t hl_memory_trace_track_next(void);
void hl_memory_trace_sample_locked(struct hl_memory_state_t* state);
void hl_memory_trace_sample(struct hl_memory_state_t* state);
static inline bool hl_memory_event_traced(hl_memory_event_t event) {
  return event == HL_MEMORY_EVENT_ALLOCA || event == HL_MEMORY_EVENT_FREE_BYTES;
}

// Counts one command-buffer execution and its elided fills (device and queue
// |queue_id| statistics).
void hl_memory_note_elision(hl_device_t* device, uint32_t queue_id,
                            uint64_t fills_elided, uint64_t fills_shrunk,
                            uint64_t bytes);

// Process-wide counts of fallback releases (all devices, ever).
void hl_memory_global_fallbacks(uint64_t* out_frontier,
                                uint64_t* out_device_sync,
                                uint64_t* out_ordered);

// Marks |root| escaped (sticky; counted once).
void hl_root_mark_escaped(hl_root_t* root);

// Called when the last buffer of |root| went without a dealloca: the caller's
// reference has been turned into an operation reference that this function
// owns (and drops once the memory is freed or handed to a queue-ordered
// free). Frees through the device's fallback mode. Never called with locks
// held.
void hl_memory_fallback_release(hl_root_t* root);

// DEVICE_SYNC releases made on the completion thread owe a drain: the next
// host thread that allocates on |device| pays it (drains every queue, then
// frees what is owed). A no-op when nothing is owed or on the completion
// thread.
void hl_memory_pay_owed_drains(hl_device_t* device);

// hl_root_dealloca, with |who| naming the freer in use-after-free reports.
// The caller holds a reference on |root| until it returns (its dealloca op
// borrows it while the submission is finished inside the call).
hl_status_t hl_root_dealloca_as(hl_queue_t* queue, const hl_fence_t* wait_fence,
                                const hl_fence_t* signal_fence, hl_root_t* root,
                                const char* who);

// Copies (transfer.c, used by hl_queue_copy in peer_copy.c): checks
// |buffer| and the range for |what| on |queue| (a buffer of another device
// is INVALID_ARGUMENT unless |any_device|), and submits a copy as one
// transfer op, a peer copy when |peer| (a root of another device that the
// queue's device reaches).
hl_status_t hl_transfer_check_buffer(const char* what, hl_queue_t* queue,
                                     const hl_buffer_t* buffer, uint64_t offset,
                                     uint64_t length, bool any_device);
hl_status_t hl_queue_copy_direct(hl_queue_t* queue,
                                 const hl_fence_t* wait_fence,
                                 const hl_fence_t* signal_fence,
                                 hl_buffer_t* source, uint64_t source_offset,
                                 hl_buffer_t* target, uint64_t target_offset,
                                 uint64_t length, bool peer);

#define HL_ROOT_OP_REF ((UINT64_C(1) << 32) + 1)

// Shared between the files of memory state, roots, the fallback release
// and buffers (state.c, root.c, release.c, buffer.c).
extern hl_recycler_t hl_buffer_recycler_;
hl_status_t hl_root_create(hl_device_t* device, hl_queue_t* affinity,
                           hl_root_memory_t memory, hl_buffer_origin_t origin,
                           uint64_t size, uint64_t refs, hl_root_t** out_root);
void hl_root_destroy(hl_root_t* root);
void hl_memory_fallback_orphan(hl_root_t* root);
hl_status_t hl_buffer_create_view_adopting(hl_root_t* root, uint64_t offset,
                                           uint64_t length,
                                           hl_buffer_token_t* token,
                                           hl_buffer_t** out_buffer);

// The two vtables of a pool op (hl_alloca, hl_dealloca): with hipline's
// suballocator (outside checked mode) its op may run at once; with the
// driver's pool it never can, so it does not ask.
#define HL_POOL_OP_FIELDS(op)                                                \
  .issue = op##_issue, .release = op##_release, .on_submit = op##_on_submit, \
  .on_cancel = op##_on_cancel, .release_light = op##_release_light,          \
  .own_refs = op##_own_refs
#define HL_POOL_OP_VTABLES(op)                                       \
  static const hl_op_vtable_t op##_vtable = {HL_POOL_OP_FIELDS(op)}; \
  static const hl_op_vtable_t op##_vtable_at_once = {                \
      HL_POOL_OP_FIELDS(op), .run_at_once = op##_run_at_once}

// Used by alloca.c and release.c; defined in release.c and state.c.
// |recycler| NULL: the op is embedded in |root| (nothing to recycle).
bool hl_root_op_release(hl_recycler_t* recycler, hl_op_t* op, hl_root_t* root,
                        bool owns, bool light);
void hl_root_op_own(hl_root_t* root, bool* owns);
bool hl_pool_ops_run_at_once(const hl_device_t* device);

#endif  // HIPLINE_RUNTIME_MEMORY_MEMORY_INTERNAL_H_
