// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Internals of the timeline layer: devices, semaphores, queues, submissions.
//
// Locking. There is no process-wide lock: two queues (or two devices) that
// share no semaphore never touch the same lock, so submitting threads scale.
//   1. A queue's lock (hl_queue_lock, a spin lock: base/spin.h) guards its
//      pending list, issuing state, counters, frontier and failure. A
//      submitter that waits for room lets it go and sleeps on the queue's
//      space condition (its mutex is a leaf).
//   2. A semaphore's lock (hl_semaphore_lock) guards its issued value,
//      timepoints and waiter list, and serialises writes of its value and
//      failure (readers use the atomics without it).
//   3. Leaves, taken last and never held across anything else: a device's
//      lock (its queue list and event pool), its work mutex, its
//      completer's mutex, a queue's step mutex and space mutex, a host
//      waiter's own mutex, a root's lock, the backend's locks.
// Order: a queue's lock, then any number of semaphore locks one at a time
// (never two at once), then leaves. A thread never holds two queue locks.
// Waiter notifications run under their semaphore's lock and may only use
// atomics and leaves: a parked submission's pump is scheduled with an
// atomic flag and the work queue, never by taking its queue's lock.
// No backend call is made under a queue or semaphore lock on the submission
// path: a queue's pump plans a submission under the queue's lock, issues it
// unlocked (one issuer per queue, hl_queue_t.issuing, keeps stream order)
// and publishes its timepoints under the lock again (see submit.c). Anything
// that blocks (stream or event synchronize, joining threads) and every
// release that may destroy an object is done after unlocking. On backends
// whose host functions share one driver thread (host_functions_serialized:
// HIP) the device's completer thread (device_completer.c) waits on events
// and streams with no lock held and takes a queue's lock only to publish.
//
// Files. device.c (devices and their extensions), event_pool.c,
// scheduler.c (the device's work thread), semaphore.c, fence.c, queue.c (the
// queue object and the walks over a device's queues), submit.c (submitting:
// check, plan, issue, park, publish), submit_quiet.c (a submission on an
// idle queue completed on the submitting thread), completer.c (publishing,
// pumps and the completer thread) with queue_internal.h between the queue
// files, and stream_work.c (how an operation does its work on the stream,
// stream_work.h). These files use each other in one circle, and that tie is
// by design: a queue signals semaphores and a semaphore's signal wakes the
// queues parked on it (wait-before-signal: the signaller runs their pumps,
// hl_pump_sink_t), and a device walks its queues (wait_idle, the work
// thread's flush waits for issuers) while each queue holds its device.
// Cutting it would turn those direct calls into callbacks with nothing
// gained: to the layers above, the timeline is one unit behind this header
// (tools/check_circles.py allows circles inside this folder, and no other).
#ifndef HIPLINE_RUNTIME_TIMELINE_TIMELINE_INTERNAL_H_
#define HIPLINE_RUNTIME_TIMELINE_TIMELINE_INTERNAL_H_

#include <stdatomic.h>
#include <threads.h>

#include "hipline/device.h"
#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "runtime/backend/backend.h"
#include "runtime/base/spin.h"

typedef struct hl_submission_t hl_submission_t;
typedef struct hl_completer_t hl_completer_t;
typedef struct hl_waiter_t hl_waiter_t;
typedef struct hl_gated_t hl_gated_t;

//===----------------------------------------------------------------------===//
// Deferred work
//===----------------------------------------------------------------------===//

// A unit of work run on a device's completion thread (never on a stream
// callback, so it may call into the backend and release objects).
typedef struct hl_work_t {
  struct hl_work_t* next;
  void (*fn)(struct hl_work_t* work);
} hl_work_t;

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

typedef struct hl_device_memory_stats_t hl_device_memory_stats_t;

// Layer extensions: per-device state that the layers above the timeline
// (memory, invocation, executable) hang on a device without the timeline
// knowing what it is.
//
// Layering (each layer includes only those before it): base, backend,
// timeline, memory, then executable and invocation over memory, and command
// over executable. The timeline owns hl_device_t and its lifecycle and names
// no upper layer beyond the slot ids below; an upper layer owns its slot: it
// creates the state lazily, from any thread, serialising creation with a lock
// of its own, and publishes it with hl_device_extension_install (release),
// after which hl_device_extension (acquire) returns it without a lock. The
// timeline only calls the hooks:
// - destroy, once, from the device's destruction, when no other thread uses
//   the device, then clears the slot. It runs if installed, even with a NULL
//   state (a layer may keep its state elsewhere, keyed by device).
// - trim (optional, may be installed later than the state), from
//   hl_device_trim and from every synchronization point (wait_idle), before
//   the backend pool is trimmed, with UINT64_MAX when the pool has no
//   release threshold (a layer then only empties its caches); it must not
//   block on stream work.
//
// Destroy order is the slot order, in two phases:
// - slots before HL_DEVICE_EXTENSION_LATE_BEGIN are destroyed first, while
//   the completion thread still runs: deferred work their destroy queues
//   (and work already queued) is flushed afterwards;
// - later slots after the completion thread has stopped and the pooled
//   events are gone, immediately before the backend is destroyed (loaded
//   modules must be unloaded from a live backend).
typedef enum hl_device_extension_id_e {
  HL_DEVICE_EXTENSION_MEMORY = 0,  // runtime/memory (hl_memory_state_t).
  HL_DEVICE_EXTENSION_INVOCATION,  // runtime/invocation (counters).
  HL_DEVICE_EXTENSION_EXECUTABLE,  // runtime/executable (destroy hook only).
  HL_DEVICE_EXTENSION_COUNT,
} hl_device_extension_id_t;
#define HL_DEVICE_EXTENSION_LATE_BEGIN HL_DEVICE_EXTENSION_EXECUTABLE

typedef void (*hl_device_extension_destroy_fn_t)(hl_device_t* device,
                                                 void* state);
typedef void (*hl_device_extension_trim_fn_t)(hl_device_t* device,
                                              uint64_t min_bytes_to_keep);

typedef struct hl_device_extension_t {
  _Atomic(void*) state;
  _Atomic(hl_device_extension_destroy_fn_t) destroy;
  _Atomic(hl_device_extension_trim_fn_t) trim;
} hl_device_extension_t;

struct hl_device_t {
  atomic_int ref_count;
  hl_allocator_t host_allocator;
  hl_backend_t* backend;
  hl_device_properties_t props;
  hl_fallback_mode_t fallback;
  bool checked;
  hl_pool_mode_t pool_mode;
  uint32_t queue_depth;  // Submissions in flight per queue before blocking.

  // Leaf lock for the queue list and the event pool below: a spin lock
  // (base/spin.h; its sections are a few dozen instructions or a realloc).
  hl_spinlock_t lock;
  // Queues of this device (not retained; a queue removes itself when it is
  // destroyed). |lock|.
  hl_queue_t** queues;
  uint32_t queue_count;
  uint32_t queue_capacity;
  atomic_uint next_queue_id;

  // Recycled backend events. |lock|.
  hl_backend_event_t** free_events;
  uint32_t free_event_count;
  uint32_t free_event_capacity;
  atomic_int_least64_t live_events;  // Created and not destroyed.

  // Completion thread: runs hl_work_t items in order (scheduler.c).
  mtx_t work_mutex;
  cnd_t work_cond;  // The work thread sleeps on it (work_sleeping).
  cnd_t idle_cond;  // Flushers sleep on it until no work is pending.
  hl_work_t* work_head;
  hl_work_t* work_tail;
  // Reserved or enqueued and not finished, packed with the flushers'
  // hand-offs (see scheduler.c): reserving and finishing take no lock,
  // except to wake a flusher.
  _Atomic uint64_t work_pending;
  uint32_t flush_waiters;  // work_mutex.
  // Items queued since the thread last took the list (work_mutex): urgent
  // ones wake it, clean-ups are gathered (scheduler.c).
  bool work_urgent;
  uint32_t work_lazy;
  hl_time_t work_lazy_deadline;
  bool work_sleeping;
  bool work_stop;
  thrd_t work_thread;

  // The completer of queues completed by events (device_completer.c),
  // started with the first such queue; stopped at destruction.
  _Atomic(hl_completer_t*) completer;

  // State of the layers above, one slot each (see hl_device_extension_t).
  hl_device_extension_t extensions[HL_DEVICE_EXTENSION_COUNT];

  // Peer access (device_peer.c): bit i is set once this device reaches the
  // memory of the devices of ordinal i of its backend (set, never cleared,
  // after the backend enabled it; read with acquire loads).
  _Atomic uint64_t peers_enabled;
  // hl_device_peer_stats_t, relaxed counters.
  _Atomic uint64_t peer_copies;
  _Atomic uint64_t peer_bytes;
  _Atomic uint64_t staged_copies;
  _Atomic uint64_t staged_bytes;
  _Atomic uint64_t cross_device_waits;
};

// Whether queues of |device| reach memory of |owner| (hl_device_peer_access_
// enabled without the NULL checks): the same device, or enabled peers.
static inline bool hl_device_reaches(const hl_device_t* device,
                                     const hl_device_t* owner) {
  if (device == owner) return true;
  return device->props.backend == owner->props.backend &&
         owner->props.ordinal >= 0 && owner->props.ordinal < 64 &&
         ((atomic_load_explicit(&((hl_device_t*)device)->peers_enabled,
                                memory_order_acquire) >>
           owner->props.ordinal) &
          1u);
}

// The state installed in |id|'s slot, or NULL (acquire: what the installing
// thread wrote before installing is visible).
void* hl_device_extension(hl_device_t* device, hl_device_extension_id_t id);
// Installs |destroy| and then publishes |state| (release) in |id|'s slot.
// Once per device and slot; the caller serialises with its own lock.
void hl_device_extension_install(hl_device_t* device,
                                 hl_device_extension_id_t id, void* state,
                                 hl_device_extension_destroy_fn_t destroy);
// Installs the optional trim hook of |id|'s slot.
void hl_device_extension_set_trim(hl_device_t* device,
                                  hl_device_extension_id_t id,
                                  hl_device_extension_trim_fn_t trim);

// The body of |device|'s work thread (scheduler.c): runs queued work in
// order until work_stop is set and the queue is drained.
int hl_device_work_main(void* arg);

// Queues |work| on |device|'s completion thread.
void hl_device_enqueue_work(hl_device_t* device, hl_work_t* work);

// Pump sinks (completer.c). A queue's pump (issuing submissions that a signal
// made issuable) normally runs on its device's work thread. A thread that
// signals opens a sink before it takes a queue or semaphore lock and closes it
// once it holds no lock: the pumps its signals scheduled then run on it,
// so a chain of submissions across queues (A waits on B, B on A) moves on
// the thread that completes each link, without waking the work thread per
// link (a system call and a sleeping thread's latency, ~10 us here). A
// close runs at most 64 pumps and hands the rest to the work thread.
#define HL_PUMP_SINK_CAPACITY 16
typedef struct hl_pump_sink_t {
  hl_queue_t* queues[HL_PUMP_SINK_CAPACITY];
  uint32_t count;
} hl_pump_sink_t;
// Opens |sink| unless this thread has one open; returns whether the caller
// owns it and must close it.
bool hl_pump_sink_open(hl_pump_sink_t* sink);
// Runs the pumps in |sink| and closes it. No lock held.
void hl_pump_sink_close(hl_pump_sink_t* sink);
// Counts one work item as pending before it is queued (flushes wait for it),
// for work whose effects become visible before it can be queued; queue it
// later with hl_device_enqueue_cleanup.
void hl_device_reserve_work(hl_device_t* device);
// Drops a reference held by a runtime object (a buffer's root, say).
// hl_device_release waits for the device's deferred work first, so that a
// user's last release destroys the device on the spot; a runtime object's
// release only needs that when it is the last reference.
void hl_device_release_internal(hl_device_t* device);
// Queues a clean-up (destroying a finished submission; |reserved|: counted
// by hl_device_reserve_work already). It does not wake the work thread at
// once: clean-ups run in batches, within a millisecond, or at once when
// someone flushes.
void hl_device_enqueue_cleanup(hl_device_t* device, hl_work_t* work,
                               bool reserved);
// Gives a reservation back without work (an issuer that finished).
void hl_device_unreserve_work(hl_device_t* device);
// Blocks until every issuer that had started on one of the device's queues
// (between planning a submission and the end of its publish step) is done
// (queue.c; takes the device's lock).
void hl_device_wait_issuers(hl_device_t* device);
// Blocks until every issuer has finished (hl_device_wait_issuers) and then
// every work item enqueued so far has run.
void hl_device_flush_work(hl_device_t* device);
// Stops the work thread once its queue is drained and joins it.
void hl_device_stop_work(hl_device_t* device);
// Stops |device|'s completer thread, if it was started (every queue is gone).
void hl_device_stop_completer(hl_device_t* device);
// Completer threads started on |device| (1 once a queue completed by events
// exists) and queue step threads running (tests look).
void hl_device_completer_threads(hl_device_t* device, uint32_t* out_completers,
                                 uint32_t* out_step_threads);
// True on the device's work thread, its completer and queue step threads: the
// runtime's own threads, which never block on a queue's depth.
bool hl_device_on_runtime_thread(hl_device_t* device);

// Event pool (event_pool.c; takes the device's lock, a leaf). Issuing
// takes a pooled event, or NULL when the pool is empty (the issuer then
// creates one, unlocked); recycling puts one back.
hl_backend_event_t* hl_device_take_event(hl_device_t* device);
void hl_device_recycle_event(hl_device_t* device, hl_backend_event_t* event);
// The device's leaf mutex (queue list, event pool); tests look inside.
void hl_device_lock(hl_device_t* device);
void hl_device_unlock(hl_device_t* device);

// A synchronization point: returns pool memory above the release threshold
// (as HIP does at stream and device synchronization).
void hl_device_apply_release_threshold(hl_device_t* device);

// Snapshot of the device's queues, each retained; caller releases them.
hl_status_t hl_device_snapshot_queues(hl_device_t* device,
                                      hl_queue_t*** out_queues,
                                      uint32_t* out_count);

//===----------------------------------------------------------------------===//
// Semaphores
//===----------------------------------------------------------------------===//

// A backend event shared by the timepoints of one submission; recycled into
// the device's pool when the last reference goes (any thread, any lock).
// A submission records no event at issue (nothing needs a device timepoint
// yet): its timepoints then share a *lazy* one, |event| NULL and |stream|
// the producing stream, until a queue that waits on one of them records an
// event there (hl_shared_event_materialize): later than the producer's
// point, so conservative, never early.
typedef struct hl_shared_event_t {
  hl_device_t* device;
  _Atomic(hl_backend_event_t*) event;
  hl_backend_stream_t* stream;  // Lazy: where to record; NULL otherwise.
  atomic_int refs;
} hl_shared_event_t;
// A shared event for |event| with one reference (event_pool.c; any thread).
// |event| NULL makes it lazy, recorded on demand on |stream|.
hl_status_t hl_shared_event_create(hl_device_t* device,
                                   hl_backend_event_t* event,
                                   hl_backend_stream_t* stream,
                                   hl_shared_event_t** out_shared);
void hl_shared_event_drop(hl_shared_event_t* shared);
// The device event of |shared|, recording one on its stream now when it is
// lazy and has none yet. The caller holds the lock of a semaphore with a
// timepoint on |shared| whose value is not reached: the producing queue
// cannot publish past it, so its stream is alive. Racing callers (the same
// submission's timepoints on several semaphores) keep the first event.
hl_status_t hl_shared_event_materialize(hl_shared_event_t* shared,
                                        hl_backend_event_t** out_event);

// A device timepoint: |value| is signalled when |shared->event| completes.
typedef struct hl_timepoint_t {
  struct hl_timepoint_t* next;  // Ascending by value.
  struct hl_timepoint_t* prev;
  uint64_t value;
  hl_shared_event_t* shared;  // One reference.
} hl_timepoint_t;

// Something waiting for a semaphore to reach |value| (or to fail, or, when
// |on_issue| is set, for a device signal >= |value| to be issued).
struct hl_waiter_t {
  hl_waiter_t* next;
  hl_semaphore_t* semaphore;  // Registered on; not retained.
  uint64_t value;
  bool on_issue;
  bool registered;
  // Called with the semaphore's lock held when the condition holds (the
  // waiter is unregistered by then). Must not block, call into the backend
  // or take a queue or semaphore lock: atomics and leaf locks only.
  void (*notify)(hl_waiter_t* waiter);
};

struct hl_semaphore_t {
  atomic_int ref_count;  // The host allocator is in its recycler header.
  uint64_t id;           // Unique for the process; never reused.
  // See the top of this file. A spin lock (base/spin.h): its sections are
  // short and never wait for other work.
  hl_spinlock_t lock;
  // Only grows: raised under |lock|, or without it by
  // hl_semaphore_signal_unlocked's fast path (a compare-and-swap either way),
  // or by the owning queue alone (hl_semaphore_signal_owned).
  _Atomic uint64_t value;
  _Atomic(hl_status_t) failure;  // First failure; written once, |lock|.
  // Highest value with a device timepoint. Written under |lock|; a pump
  // reads it without (and re-checks under |lock| before it parks). A fast
  // signal does not raise it: hl_semaphore_issued_value reads the larger of
  // it and |value|.
  _Atomic uint64_t issued_value;
  // |lock| for the rest.
  hl_timepoint_t* timepoints;       // Ascending by value.
  hl_timepoint_t* timepoints_tail;  // Last entry: new values append in O(1).
  hl_waiter_t* waiters;
  // Registered waiters: changed under |lock|, read without it by
  // hl_semaphore_signal_owned and hl_semaphore_signal_unlocked.
  atomic_uint waiter_count;
  // Entries of |timepoints|: changed under |lock|, read without it by
  // hl_semaphore_signal_unlocked (its fast path needs none attached).
  atomic_uint timepoint_count;
  // A queue's own timeline (or its internal done semaphore): only the queue
  // signals or fails it, under the queue's lock.
  bool queue_owned;
};

// Drops one reference to |counter| unless it is the last one; returns
// whether it did. For releases on threads that must not destroy objects.
static inline bool hl_ref_drop_unless_last(atomic_int* counter) {
  int refs = atomic_load_explicit(counter, memory_order_relaxed);
  while (refs > 1) {
    if (atomic_compare_exchange_weak_explicit(counter, &refs, refs - 1,
                                              memory_order_acq_rel,
                                              memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

// Releases |semaphore| (NULL: nothing) unless this is its last reference;
// returns false, and leaves the reference, when it is. Any thread, any lock.
bool hl_semaphore_release_unless_last(hl_semaphore_t* semaphore);
// The same for a queue.
bool hl_queue_release_unless_last(hl_queue_t* queue);

static inline void hl_semaphore_lock(hl_semaphore_t* semaphore) {
  hl_spinlock_lock(&semaphore->lock);
}
static inline void hl_semaphore_unlock(hl_semaphore_t* semaphore) {
  hl_spinlock_unlock(&semaphore->lock);
}
static inline uint64_t hl_semaphore_issued_value(hl_semaphore_t* semaphore) {
  uint64_t issued =
      atomic_load_explicit(&semaphore->issued_value, memory_order_acquire);
  uint64_t value =
      atomic_load_explicit(&semaphore->value, memory_order_acquire);
  return issued > value ? issued : value;  // A reached value is issued.
}

// Unregisters |waiter| from the semaphore it was last registered on, if it
// still is (takes that semaphore's lock; no other semaphore lock held).
// Only the waiter's owner calls it, so |waiter->semaphore| is stable.
void hl_waiter_unregister(hl_waiter_t* waiter);

// The semaphore's lock held for all of these.
void hl_semaphore_add_waiter_locked(hl_semaphore_t* semaphore,
                                    hl_waiter_t* waiter);
void hl_semaphore_remove_waiter_locked(hl_waiter_t* waiter);
// Signals |value| (ignored if not greater). Wakes waiters.
void hl_semaphore_signal_locked(hl_semaphore_t* semaphore, uint64_t value);
// Fails with |status| (consumed) unless already failed.
void hl_semaphore_fail_locked(hl_semaphore_t* semaphore, hl_status_t status);
// hl_semaphore_signal_unlocked for a semaphore whose queue's lock is held
// (queue_owned): without the semaphore's lock when nobody waits and no
// timepoint is attached. Every registration of a waiter looks at the value
// after hl_semaphore_add_waiter_locked, so none misses it.
void hl_semaphore_signal_owned(hl_semaphore_t* semaphore, uint64_t value);
// hl_semaphore_signal_owned of |a| then |b| (both owned by one queue, whose
// lock is held) with one full barrier for the two.
void hl_semaphore_signal_owned_two(hl_semaphore_t* a, uint64_t a_value,
                                   hl_semaphore_t* b, uint64_t b_value);
// hl_semaphore_signal_owned_two of a queue's |timeline| and |done| to its
// next |value| (above both values, which only that queue raises, in order),
// for a queue with nothing in flight (submit_quiet.c): plain stores and
// one full barrier when no timepoint is attached and nobody waits.
void hl_semaphore_signal_owned_next(hl_semaphore_t* timeline,
                                    hl_semaphore_t* done, uint64_t value);
// The same two, taking the semaphore's lock (no semaphore lock held). A
// signal of a semaphore nobody waits on and with no timepoint attached takes
// no lock: it raises the value with a compare-and-swap and then looks at the
// waiter and timepoint counts (registrations count first, then look at the
// value), taking the lock only if one appeared. A signal that races a
// failure may land after it (the two were concurrent); one that starts
// after the failure is visible is ignored.
void hl_semaphore_signal_unlocked(hl_semaphore_t* semaphore, uint64_t value);
void hl_semaphore_fail_unlocked(hl_semaphore_t* semaphore, hl_status_t status);
// Attaches a timepoint for |value| backed by |shared| (takes a reference on
// success).
hl_status_t hl_semaphore_add_timepoint_locked(hl_semaphore_t* semaphore,
                                              uint64_t value,
                                              hl_shared_event_t* shared);
// Finds the earliest timepoint with value >= |value|, or NULL.
hl_timepoint_t* hl_semaphore_find_timepoint_locked(hl_semaphore_t* semaphore,
                                                   uint64_t value);
static inline hl_status_t hl_semaphore_failure(hl_semaphore_t* semaphore) {
  return atomic_load_explicit(&semaphore->failure, memory_order_acquire);
}
// Sequentially consistent (free on x86 and Arm, where it is the same
// instruction as an acquire load): hl_semaphore_signal_owned relies on it.
static inline uint64_t hl_semaphore_value(hl_semaphore_t* semaphore) {
  return atomic_load_explicit(&semaphore->value, memory_order_seq_cst);
}

//===----------------------------------------------------------------------===//
// Fences
//===----------------------------------------------------------------------===//

typedef struct hl_fence_entry_t {
  hl_semaphore_t* semaphore;  // Retained.
  uint64_t value;
} hl_fence_entry_t;

struct hl_fence_t {
  atomic_int ref_count;  // The host allocator is in its recycler header.
  hl_fence_entry_t* entries;
  size_t count;
  size_t capacity;
  // Embedded fences only (NULL elsewhere): pairs of this semaphore hold no
  // reference, because the fence's owner keeps it alive (a root's fences
  // and its affinity queue's timeline, which every alloca records).
  hl_semaphore_t* unretained;
  hl_fence_entry_t inline_entries[4];
};

// A fence that lives inside another object or on the stack: never retained,
// never shared, so it needs no recycled allocation of its own. Initialised
// empty; deinit drops its pairs and any entries it grew into.
void hl_fence_init_embedded(hl_fence_t* fence, hl_semaphore_t* unretained);
void hl_fence_deinit_embedded_slow(hl_fence_t* fence);
static inline void hl_fence_deinit_embedded(hl_fence_t* fence) {
  // The common case, inline: nothing held (no pairs, or only the one that
  // holds no reference) in the fence's own entries.
  if (fence->entries == fence->inline_entries &&
      (!fence->count || (fence->count == 1 &&
                         fence->entries[0].semaphore == fence->unretained))) {
    fence->count = 0;
    return;
  }
  hl_fence_deinit_embedded_slow(fence);
}

// Waits on |count| pairs (any number) as hl_semaphore_wait_many does: every
// pending pair has a waiter, so a failure of any of them ends the wait.
hl_status_t hl_semaphore_wait_pairs(hl_wait_mode_t mode, size_t count,
                                    const hl_fence_entry_t* pairs,
                                    hl_time_t deadline, size_t* out_index);

// Drops pairs already reached (and not failed). For fences that only order
// work, such as a root's use fence, which would otherwise grow with every
// queue or invocation that touched the root.
void hl_fence_prune_reached(hl_fence_t* fence);

// Calls |fn(user, status)| on |device|'s completion thread once every pair of
// |fence| (copied now) is reached, or with the first failure. Never blocks.
typedef void (*hl_fence_callback_t)(void* user, hl_status_t status);
hl_status_t hl_fence_notify(const hl_fence_t* fence, hl_device_t* device,
                            hl_fence_callback_t fn, void* user);

//===----------------------------------------------------------------------===//
// Queues and submissions
//===----------------------------------------------------------------------===//

// Context handed to operations while they are issued.
typedef struct hl_issue_ctx_t {
  hl_queue_t* queue;
  hl_device_t* device;
  hl_backend_t* backend;
  hl_backend_stream_t* stream;
  hl_submission_t* submission;
  // True when every wait was already reached on the host at issue time, so
  // the submission cannot fail because of its waits later.
  bool waits_settled;
  // Set by hl_issue_enqueue_gated on queues completed by events: the op's
  // host work runs on the queue's step thread once the stream reaches it
  // (device_completer.c), and issuing goes on from there.
  hl_gated_t* host_step;
} hl_issue_ctx_t;

typedef struct hl_op_t hl_op_t;
typedef struct hl_op_vtable_t {
  // Enqueues the operation's device work on |ctx->stream|. Called in queue
  // order by the queue's one issuer, without the queue's lock (see
  // submit.c). A failure fails the submission (and the queue, for backend
  // errors).
  hl_status_t (*issue)(hl_op_t* op, hl_issue_ctx_t* ctx);
  // Drops the operation's resources once the submission has completed,
  // failed or been cancelled; |status| (borrowed) says which. Runs on the
  // completion thread.
  void (*release)(hl_op_t* op, hl_status_t status);
  // Optional: called once with the queue's lock held, as soon as the
  // submission has its |value| on |queue|'s timeline and before anything is
  // issued, so uses can be recorded before any other thread can look.
  void (*on_submit)(hl_op_t* op, hl_queue_t* queue, uint64_t value);
  // Optional: called by the issuer (no lock held) when the submission
  // failed before this op was issued (so |issue| will never run), before the
  // submission's signals are failed and before later submissions of the
  // queue are issued; |status| (borrowed) is the submission's failure.
  void (*on_cancel)(hl_op_t* op, hl_status_t status);
  // Optional: |release| where it is cheap and safe on any thread, with any
  // lock held (it drops references that are not the last ones, recycles
  // memory, takes no lock that is not a leaf); returns false when the
  // completion thread must run |release| for the rest (what it released it
  // forgets, so |release| does not release it twice). Lets a stream worker
  // finish a submission without waking the completion thread.
  bool (*release_light)(hl_op_t* op, hl_status_t status);
  // Optional: the op borrowed references its submitter holds for the
  // duration of hl_queue_submit (as the submission does, see |borrowed| in
  // queue_internal.h) and takes its own now: the submission may outlive that
  // call. Called by the issuer, inside hl_queue_submit, at most once.
  void (*own_refs)(hl_op_t* op);
  // Optional: runs the op's whole work now, on the submitting thread, if it
  // needs no backend call and nothing that can wait (a suballocator hit,
  // say), and returns true; returns false, changing nothing, otherwise.
  // Called with the queue's lock held for the one op of a submission on a
  // quiet queue: nothing in flight or pending, every wait reached, no fault
  // injection. Everything before it in queue order has completed, so the op
  // runs as if the stream had reached it, and the submission completes
  // inside hl_queue_submit with no stream work. |value| is the submission's
  // value on |queue|'s timeline; |on_submit| has run already (the general
  // path's at-once completion) or runs right after a true return (the quiet
  // path, submit_quiet.c, which assigns the value only once the op ran). A
  // failure goes in |out_status| (the submission fails with it).
  bool (*run_at_once)(hl_op_t* op, hl_queue_t* queue, uint64_t value,
                      hl_status_t* out_status);
} hl_op_vtable_t;
struct hl_op_t {
  const hl_op_vtable_t* vtable;
  hl_op_t* next;
};

// Work that runs on the stream in order, but only if the submission has not
// failed; a returned status fails the submission. On a queue completed by
// events it is a host step run by the queue's step thread (see
// hl_issue_ctx_t.host_step); otherwise a host function on the stream.
// |storage| is owned by the caller until the submission completes (embed it
// in the op). |runtime_work|: |fn| is the runtime's own short work (see
// hl_backend_vtable_t.launch_runtime_func), which an idle host stream may
// run on the issuing thread; false for user code, kernels and copies.
typedef hl_status_t (*hl_gated_fn_t)(void* user);
struct hl_gated_t {
  hl_submission_t* submission;
  hl_gated_fn_t fn;
  void* user;
  // Optional, set before the enqueue: runs right after |fn| ran or was
  // skipped, in the same stream item (one item instead of two on a busy
  // stream). Runtime work: short, leaf locks only.
  hl_host_fn_t after;
  void* after_user;
};
hl_status_t hl_issue_enqueue_gated(hl_issue_ctx_t* ctx, hl_gated_t* storage,
                                   hl_gated_fn_t fn, void* user,
                                   bool runtime_work);

// Fails |submission| with |status| (consumed; first failure wins). Safe from
// host functions. When |fail_queue| is set the queue fails too (sticky).
void hl_submission_fail(hl_submission_t* submission, hl_status_t status,
                        bool fail_queue);

// Describes |submission| for messages: "queue 2 submission 17".
void hl_submission_describe(const hl_submission_t* submission, char* buffer,
                            size_t capacity);

// Submits |ops| (a NULL-terminated list linked through |next|; ownership
// passes to the queue even on failure: every op is released exactly once).
// On success *out_value (may be NULL) is the submission's value on the
// queue's timeline.
hl_status_t hl_queue_submit(hl_queue_t* queue, const hl_fence_t* wait_fence,
                            const hl_fence_t* signal_fence, hl_op_t* ops,
                            uint64_t* out_value);

// Blocks until |queue|'s stream has run everything issued so far, host work
// included (stop-the-world drains). Submissions parked on a signal nobody
// has submitted are not waited for.
void hl_queue_drain(hl_queue_t* queue);

// The backend stream of |queue| (borrowed).
hl_backend_stream_t* hl_queue_stream(const hl_queue_t* queue);
// Last value assigned on the queue's timeline.
uint64_t hl_queue_submitted_value(hl_queue_t* queue);
// hl_queue_release for the runtime's own references (roots, invocations,
// submissions, snapshots): never waits for the device's deferred work.
void hl_queue_release_internal(hl_queue_t* queue);

// A semaphore value, named by the semaphore's id (ids are never reused).
typedef struct hl_timepoint_id_t {
  uint64_t semaphore_id;
  uint64_t value;
} hl_timepoint_id_t;
#define HL_QUEUE_FRONTIER_CAPACITY 32
// Copies |queue|'s wait frontier (at most HL_QUEUE_FRONTIER_CAPACITY
// entries) to |out| and returns the count: every value in it is reached, or
// waited for on the queue's stream, before whatever the queue issues next.
// Called by an op while it is issued (takes the queue's lock).
size_t hl_queue_frontier_snapshot(hl_queue_t* queue, hl_timepoint_id_t* out);
// The queue's internal done semaphore: it reaches N once the Nth submission
// has finished on the stream, completed or failed, and never fails.
hl_semaphore_t* hl_queue_done(const hl_queue_t* queue);

#endif  // HIPLINE_RUNTIME_TIMELINE_TIMELINE_INTERNAL_H_
