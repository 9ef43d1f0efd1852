// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Shared internals of the host backend: streams served by worker threads and
// a stream-ordered pool over host memory.
//
// Files and what each may call (no circle):
//   host_item.c    stream items and their per-device cache (a leaf)
//   host_stream.c  streams and their workers            -> items
//   host_event.c   events, (stream, sequence) pairs      -> streams, items
//   host_pool.c    the stream-ordered pool              -> streams, items
//   host_peer.c    peer access (HIPLINE_HOST_PEERS)     -> items
//   host_backend.c the vtable and device lifecycle       -> all of the above
#ifndef HIPLINE_RUNTIME_BACKEND_HOST_HOST_INTERNAL_H_
#define HIPLINE_RUNTIME_BACKEND_HOST_HOST_INTERNAL_H_

#include <stdatomic.h>
#include <stdint.h>
#include <threads.h>

#include "runtime/backend/backend.h"
#include "runtime/base/recycler.h"

typedef struct hl_host_item_t hl_host_item_t;
typedef struct hl_host_block_t hl_host_block_t;

struct hl_backend_stream_t {
  atomic_int ref_count;  // The owner plus events and waits that name it.
  struct hl_host_backend_t* device;
  uint32_t id;  // Dense per device; indexes dependency tables.
  // The worker's side: it sleeps and wakes sequence waiters under |mutex|.
  mtx_t mutex;
  cnd_t work_cond;  // Signals the worker when it sleeps: new items or stop.
  cnd_t done_cond;  // Broadcast when completed_seq moves and someone waits.
  // Sequence of the last item finished (the worker writes it).
  _Atomic uint64_t completed_seq;
  atomic_int done_waiters;      // Threads in hl_host_stream_wait_seq.
  atomic_bool worker_sleeping;  // The worker waits on work_cond (|mutex|).
  // Producers' side, on cache lines of its own: a submitter and the worker
  // would otherwise move one lock's line between cores for every item.
  // Items are pushed under |push_lock| (so sequence order is push order)
  // onto |pushed|, a stack the worker empties with one exchange and
  // reverses; the worker never takes |push_lock|. |pushed| has a line of
  // its own too: the worker spins reading it, and on the mutex's line that
  // would take the line away from a pusher between its lock, its push and
  // its unlock.
  char pad0[64];
  hl_spinlock_t push_lock;         // A spin lock (base/spin.h): a few stores.
  _Atomic uint64_t submitted_seq;  // Last item pushed (|push_lock|).
  char pad_pushed[64];
  _Atomic(hl_host_item_t*) pushed;  // Newest first.
  char pad1[64];
  hl_host_item_t* stop_item;  // Made at creation so destroy cannot fail.
  thrd_t thread;
  uint64_t rng;           // Fault-injection delays.
  uint64_t delay_max_us;  // HIPLINE_FAULTS stream_delay_us, at creation.
  // Runtime work may run on the caller when the stream is idle
  // (hl_host_stream_run_inline; HIPLINE_HOST_INLINE, at creation).
  bool inline_work;
  uint64_t inline_rng;  // With delays, a coin per call (|push_lock|).
  // Highest sequence of each other stream that this stream has waited on
  // (an event dependency), indexed by stream id. Guarded by the pool lock.
  uint64_t* deps;
  uint32_t deps_capacity;
};

typedef struct hl_host_pool_t {
  // Every field below. A spin lock (base/spin.h): each malloc_async and
  // free_async takes it once, for a few dozen instructions.
  hl_spinlock_t lock;
  hl_pool_attributes_t attrs;
  hl_backend_pool_stats_t stats;
  // Free blocks, one list per size class.
  hl_host_block_t** bins;
  uint32_t bin_count;
  // Live blocks by pointer (open addressing).
  hl_host_block_t** live;
  size_t live_capacity;
  size_t live_count;
  int64_t block_count;
  bool poison;  // Checked mode: poison freed memory in stream order.
} hl_host_pool_t;

typedef struct hl_host_backend_t {
  hl_backend_t base;
  int ordinal;
  uint64_t memory_bytes;
  atomic_uint next_stream_id;
  atomic_int_least64_t live_streams;
  atomic_int_least64_t live_events;
  atomic_int_least64_t live_modules;
  // HIPLINE_HOST_INLINE: streams may run runtime work inline.
  bool inline_work;
  // Ordinals whose memory this device was enabled to reach (host_peer.c).
  _Atomic uint64_t peers_enabled;
  hl_host_pool_t pool;
} hl_host_backend_t;

// Streams (host_stream.c).
hl_status_t hl_host_stream_create(hl_host_backend_t* device,
                                  hl_backend_stream_t** out_stream);
// Runs everything queued, then ends the worker thread. The caller forgets
// the stream in the pool and drops the owner's reference.
void hl_host_stream_stop(hl_backend_stream_t* stream);
void hl_host_stream_retain(hl_backend_stream_t* stream);
void hl_host_stream_release(hl_backend_stream_t* stream);
// Enqueues a host function; returns the item's sequence in |*out_seq|.
hl_status_t hl_host_stream_enqueue_fn(hl_backend_stream_t* stream,
                                      hl_host_fn_t fn, void* user,
                                      uint64_t* out_seq);
// Enqueues a wait until |other| completes |seq|.
hl_status_t hl_host_stream_enqueue_wait(hl_backend_stream_t* stream,
                                        hl_backend_stream_t* other,
                                        uint64_t seq);
// Current submitted sequence (the sequence the next record would capture).
uint64_t hl_host_stream_submitted(hl_backend_stream_t* stream);
uint64_t hl_host_stream_completed(hl_backend_stream_t* stream);
// True when called from |stream|'s own worker thread (inside a host
// function running on it).
bool hl_host_stream_is_current(hl_backend_stream_t* stream);
// Runs |fn(user)| on the calling thread, as the stream's next item, when the
// stream has nothing queued or running: an idle device would start it at
// once. Returns false (nothing run) otherwise; the caller then enqueues it.
// Only for the runtime's own short work, which takes leaf locks and never
// waits for the caller (see hl_backend_vtable_t.launch_runtime_func). While
// |fn| runs, hl_host_stream_is_current(stream) is true on this thread, and
// items pushed meanwhile run after it.
// Claims |stream| for this thread while it is idle, as one inline run that
// lasts until hl_host_stream_unclaim: runtime work this thread launches on
// it meanwhile runs at once with no claim of its own. A push by this thread
// ends the claim first; after a push by another thread (which the worker
// runs once the claim ends) runtime work is queued behind it and the claim
// ends, so stream order holds. False when the
// stream is busy, inline work is off, delays are injected, or this thread
// already holds a claim.
bool hl_host_stream_claim(hl_backend_stream_t* stream);
void hl_host_stream_unclaim(hl_backend_stream_t* stream);
// Whether this thread's claim on |stream| still holds: runtime work it
// launched now would run at once (not from work at the claim's point).
bool hl_host_stream_claim_intact(hl_backend_stream_t* stream);
bool hl_host_stream_run_inline(hl_backend_stream_t* stream, hl_host_fn_t fn,
                               void* user);
// Whether this thread is running work of |stream| inline right now.
bool hl_host_stream_running_inline(hl_backend_stream_t* stream);
// The sequence an event recorded on |stream| now completes with: the last
// one enqueued (or claimed) so far, after ending this thread's claim. Work
// another thread runs inline meanwhile may fall on either side.
uint64_t hl_host_stream_record_seq(hl_backend_stream_t* stream);
// Blocks until |stream| completes |seq|.
void hl_host_stream_wait_seq(hl_backend_stream_t* stream, uint64_t seq);

// Pool (host_pool.c).
hl_status_t hl_host_pool_initialize(hl_host_backend_t* device);
void hl_host_pool_deinitialize(hl_host_backend_t* device);
hl_status_t hl_host_pool_malloc(hl_host_backend_t* device, size_t size,
                                hl_backend_stream_t* stream, void** out_ptr);
hl_status_t hl_host_pool_free(hl_host_backend_t* device, void* ptr,
                              hl_backend_stream_t* stream);
hl_status_t hl_host_pool_trim(hl_host_backend_t* device,
                              uint64_t min_bytes_to_keep);
// Applies the release threshold (called at synchronization points).
void hl_host_pool_release_to_threshold(hl_host_backend_t* device);
// Records that |stream| now waits on |other| up to |seq| (event dependency).
void hl_host_pool_note_dependency(hl_host_backend_t* device,
                                  hl_backend_stream_t* stream,
                                  hl_backend_stream_t* other, uint64_t seq);
// Forgets a destroyed stream: its cached blocks become plainly free.
void hl_host_pool_forget_stream(hl_host_backend_t* device,
                                hl_backend_stream_t* stream);

// The host backend's peer entries (host_peer.c).
hl_status_t hl_host_peer_can_access(hl_backend_t* backend, hl_backend_t* peer,
                                    bool* out_can_access);
hl_status_t hl_host_peer_enable(hl_backend_t* backend, hl_backend_t* peer);
hl_status_t hl_host_memcpy_peer_async(hl_backend_t* backend, void* dst,
                                      hl_backend_t* dst_backend,
                                      const void* src,
                                      hl_backend_t* src_backend, size_t size,
                                      hl_backend_stream_t* stream);

// The host backend's vtable set_poison entry (checked mode).
void hl_host_backend_set_poison(hl_backend_t* backend, bool poison);

#endif  // HIPLINE_RUNTIME_BACKEND_HOST_HOST_INTERNAL_H_
