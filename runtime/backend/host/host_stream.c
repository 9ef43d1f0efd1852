// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host streams: a FIFO of items served by one worker thread per stream.

#include <stdlib.h>
#include <string.h>

#include "runtime/backend/host/host_item.h"
#include "runtime/base/faults.h"
#include "runtime/base/spin.h"
#include "runtime/base/time_util.h"

static uint64_t hl_host_rng_next(uint64_t* state) {
  // splitmix64: cheap and good enough for delays.
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The stream whose item this thread runs inline (hl_host_stream_run_inline);
// NULL elsewhere.
static _Thread_local hl_backend_stream_t* hl_host_inline_stream_;

// The stream this thread has claimed (hl_host_stream_claim) and the
// sequence its claim took; NULL: none.
static _Thread_local hl_backend_stream_t* hl_host_claimed_stream_;
static _Thread_local uint64_t hl_host_claimed_seq_;

static void hl_host_stream_complete(hl_backend_stream_t* stream, uint64_t seq);

// Ends this thread's claim on |stream|, if it holds one: the claimed
// sequence completes, so what is pushed next runs at once. Not from work
// running at the claim's point (what it pushes runs after it, once the
// claim ends).
static void hl_host_stream_end_claim(hl_backend_stream_t* stream) {
  if (HL_LIKELY(hl_host_claimed_stream_ != stream) ||
      hl_host_inline_stream_ == stream) {
    return;
  }
  hl_host_claimed_stream_ = NULL;
  hl_host_stream_complete(stream, hl_host_claimed_seq_);
}

void hl_host_stream_retain(hl_backend_stream_t* stream) {
  atomic_fetch_add_explicit(&stream->ref_count, 1, memory_order_relaxed);
}

void hl_host_stream_release(hl_backend_stream_t* stream) {
  if (atomic_fetch_sub_explicit(&stream->ref_count, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  mtx_destroy(&stream->mutex);
  cnd_destroy(&stream->work_cond);
  cnd_destroy(&stream->done_cond);
  free(stream->deps);
  hl_allocator_free(stream->device->base.host_allocator, stream);
}

static void hl_host_item_execute(hl_backend_stream_t* stream,
                                 hl_host_item_t* item) {
  switch (item->kind) {
    case HL_HOST_ITEM_FN:
      item->fn.fn(item->fn.user);
      break;
    case HL_HOST_ITEM_WAIT:
      hl_host_stream_wait_seq(item->wait.other, item->wait.seq);
      hl_host_stream_release(item->wait.other);
      break;
    case HL_HOST_ITEM_MEMCPY:
      if (item->memcpy.size) {
        memmove(item->memcpy.dst, item->memcpy.src, item->memcpy.size);
      }
      break;
    case HL_HOST_ITEM_MEMSET32: {
      uint32_t* p = (uint32_t*)item->memset32.dst;
      for (size_t i = 0; i < item->memset32.count; ++i)
        p[i] = item->memset32.value;
      break;
    }
    case HL_HOST_ITEM_KERNEL: {
      void* params[16];
      size_t offset = 0;
      const hl_host_kernel_t* k = item->kernel.kernel;
      for (uint32_t i = 0; i < k->param_count; ++i) {
        params[i] = item->kernel.storage + offset;
        offset += (k->param_sizes[i] + 7u) & ~(size_t)7u;
      }
      k->fn(params, &item->kernel.config);
      break;
    }
    case HL_HOST_ITEM_POISON:
      memset(item->poison.ptr, 0xDB, item->poison.size);
      break;
    case HL_HOST_ITEM_STOP:
      break;
  }
  (void)stream;
}

static bool hl_host_stream_has_items(const void* arg) {
  const hl_backend_stream_t* stream = (const hl_backend_stream_t*)arg;
  return atomic_load_explicit(&stream->pushed, memory_order_relaxed) != NULL;
}

// Takes every pushed item (a chain in push order), sleeping while there is
// none: after a short spin (base/spin.h), so that a steady submitter never
// pays for a wake-up.
static hl_host_item_t* hl_host_stream_take_all(hl_backend_stream_t* stream) {
  hl_spin_until(hl_host_stream_has_items, stream);
  hl_host_item_t* items = atomic_exchange(&stream->pushed, NULL);
  if (!items) {
    // Sequentially consistent with the pusher's exchange and load of
    // worker_sleeping: either it sees this flag and signals under |mutex|,
    // or the exchange below sees its item.
    mtx_lock(&stream->mutex);
    atomic_store(&stream->worker_sleeping, true);
    while (!(items = atomic_exchange(&stream->pushed, NULL))) {
      cnd_wait(&stream->work_cond, &stream->mutex);
    }
    atomic_store(&stream->worker_sleeping, false);
    mtx_unlock(&stream->mutex);
  }
  // Newest first: reverse into sequence order.
  hl_host_item_t* ordered = NULL;
  while (items) {
    hl_host_item_t* next = items->next;
    items->next = ordered;
    ordered = items;
    items = next;
  }
  return ordered;
}

// Marks |seq| finished and wakes hl_host_stream_wait_seq callers, if any.
static void hl_host_stream_complete(hl_backend_stream_t* stream, uint64_t seq) {
  // Pairs with the waiter's increment of done_waiters before it reads
  // completed_seq (both sequentially consistent): either the waiter sees the
  // new value or this sees the waiter and wakes it under the mutex.
  atomic_store(&stream->completed_seq, seq);
  if (atomic_load(&stream->done_waiters)) {
    mtx_lock(&stream->mutex);
    cnd_broadcast(&stream->done_cond);
    mtx_unlock(&stream->mutex);
  }
}

static void hl_host_stream_delay(hl_backend_stream_t* stream, uint64_t* rng) {
  uint64_t us = hl_host_rng_next(rng) % (stream->delay_max_us + 1);
  if (us) {
    hl_faults_count_delay();
    hl_sleep_ns((hl_duration_t)us * 1000);
  }
}

static int hl_host_stream_main(void* arg) {
  hl_backend_stream_t* stream = (hl_backend_stream_t*)arg;
  // Kernels that model device time (spin) sleep on this thread.
  hl_thread_set_precise_sleep();
  hl_thread_set_name("hl-stream");
  for (;;) {
    hl_host_item_t* item = hl_host_stream_take_all(stream);
    while (item) {
      hl_host_item_t* next = item->next;
      // The item before may be running inline on its caller
      // (hl_host_stream_run_inline): stream order waits for it.
      if (HL_UNLIKELY(atomic_load_explicit(&stream->completed_seq,
                                           memory_order_acquire) +
                          1 <
                      item->seq)) {
        hl_host_stream_wait_seq(stream, item->seq - 1);
      }
      if (HL_UNLIKELY(stream->delay_max_us) &&
          item->kind != HL_HOST_ITEM_STOP) {
        hl_host_stream_delay(stream, &stream->rng);
      }
      hl_host_item_execute(stream, item);
      bool stop = item->kind == HL_HOST_ITEM_STOP;
      hl_host_stream_complete(stream, item->seq);
      hl_host_item_free(stream->device, item);
      if (stop) return 0;  // Nothing is pushed after the stop item.
      item = next;
    }
  }
}

hl_status_t hl_host_stream_create(hl_host_backend_t* device,
                                  hl_backend_stream_t** out_stream) {
  hl_backend_stream_t* stream = NULL;
  HL_RETURN_IF_ERROR(hl_allocator_calloc(device->base.host_allocator,
                                         sizeof(*stream), (void**)&stream),
                     "allocating a host stream");
  atomic_init(&stream->ref_count, 1);
  stream->device = device;
  stream->id = atomic_fetch_add(&device->next_stream_id, 1);
  // Fault settings are read once: a stream keeps the delays it was born with.
  hl_faults_t faults = hl_faults_snapshot();
  stream->rng = faults.seed * 0x9e3779b97f4a7c15ull + stream->id;
  stream->delay_max_us = faults.stream_delay_us;
  stream->inline_work = device->inline_work;
  stream->inline_rng = ~stream->rng;
  hl_spinlock_init(&stream->push_lock);
  if (mtx_init(&stream->mutex, mtx_plain) != thrd_success ||
      cnd_init(&stream->work_cond) != thrd_success ||
      cnd_init(&stream->done_cond) != thrd_success) {
    hl_allocator_free(device->base.host_allocator, stream);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "creating host stream synchronization objects");
  }
  hl_status_t st =
      hl_host_item_alloc(device, HL_HOST_ITEM_STOP, &stream->stop_item);
  if (st || thrd_create(&stream->thread, hl_host_stream_main, stream) !=
                thrd_success) {
    if (stream->stop_item) hl_host_item_free(device, stream->stop_item);
    hl_status_free(st);
    mtx_destroy(&stream->mutex);
    cnd_destroy(&stream->work_cond);
    cnd_destroy(&stream->done_cond);
    hl_allocator_free(device->base.host_allocator, stream);
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "starting the worker thread of a host stream");
  }
  atomic_fetch_add(&device->live_streams, 1);
  *out_stream = stream;
  return NULL;
}

// Appends |item| and assigns its sequence. Takes ownership of |item|.
static uint64_t hl_host_stream_push(hl_backend_stream_t* stream,
                                    hl_host_item_t* item) {
  // A claim of this thread ends before anything is queued behind it.
  hl_host_stream_end_claim(stream);
  hl_spinlock_lock(&stream->push_lock);
  // Counted before the worker can see it, so completed_seq never passes
  // submitted_seq (an idle check reads submitted == completed). An
  // increment, not a store: hl_host_stream_run_inline claims sequences
  // without the mutex.
  uint64_t seq = atomic_fetch_add_explicit(&stream->submitted_seq, 1,
                                           memory_order_acq_rel) +
                 1;
  item->seq = seq;
  hl_host_item_t* top =
      atomic_load_explicit(&stream->pushed, memory_order_relaxed);
  do {
    item->next = top;
  } while (!atomic_compare_exchange_weak(&stream->pushed, &top, item));
  hl_spinlock_unlock(&stream->push_lock);
  // A spinning worker sees |pushed| move; only a sleeping one is woken.
  if (atomic_load(&stream->worker_sleeping)) {
    mtx_lock(&stream->mutex);
    cnd_signal(&stream->work_cond);
    mtx_unlock(&stream->mutex);
  }
  return seq;
}

hl_status_t hl_host_stream_push_item(hl_backend_stream_t* stream,
                                     hl_host_item_t* item, uint64_t* out_seq) {
  uint64_t seq = hl_host_stream_push(stream, item);
  if (out_seq) *out_seq = seq;
  return NULL;
}

void hl_host_stream_stop(hl_backend_stream_t* stream) {
  // The stop item was made with the stream, so stopping cannot fail.
  hl_host_item_t* item = stream->stop_item;
  stream->stop_item = NULL;
  hl_host_stream_push(stream, item);
  thrd_join(stream->thread, NULL);
}

hl_status_t hl_host_stream_enqueue_fn(hl_backend_stream_t* stream,
                                      hl_host_fn_t fn, void* user,
                                      uint64_t* out_seq) {
  hl_host_item_t* item = NULL;
  HL_RETURN_IF_ERROR(hl_host_item_alloc(stream->device, HL_HOST_ITEM_FN, &item),
                     "enqueuing a host function");
  item->fn.fn = fn;
  item->fn.user = user;
  uint64_t seq = hl_host_stream_push(stream, item);
  if (out_seq) *out_seq = seq;
  return NULL;
}

hl_status_t hl_host_stream_enqueue_wait(hl_backend_stream_t* stream,
                                        hl_backend_stream_t* other,
                                        uint64_t seq) {
  if (other == stream || seq == 0) return NULL;  // FIFO order already holds.
  if (hl_host_stream_completed(other) >= seq) return NULL;
  hl_host_item_t* item = NULL;
  HL_RETURN_IF_ERROR(
      hl_host_item_alloc(stream->device, HL_HOST_ITEM_WAIT, &item),
      "enqueuing a stream wait");
  hl_host_stream_retain(other);
  item->wait.other = other;
  item->wait.seq = seq;
  hl_host_stream_push(stream, item);
  return NULL;
}

uint64_t hl_host_stream_submitted(hl_backend_stream_t* stream) {
  return atomic_load_explicit(&stream->submitted_seq, memory_order_acquire);
}

uint64_t hl_host_stream_completed(hl_backend_stream_t* stream) {
  return atomic_load_explicit(&stream->completed_seq, memory_order_acquire);
}

typedef struct hl_host_seq_wait_t {
  hl_backend_stream_t* stream;
  uint64_t seq;
} hl_host_seq_wait_t;

static bool hl_host_seq_reached(const void* arg) {
  const hl_host_seq_wait_t* w = (const hl_host_seq_wait_t*)arg;
  return hl_host_stream_completed(w->stream) >= w->seq;
}

void hl_host_stream_wait_seq(hl_backend_stream_t* stream, uint64_t seq) {
  hl_host_seq_wait_t w = {stream, seq};
  if (hl_spin_until(hl_host_seq_reached, &w)) return;
  mtx_lock(&stream->mutex);
  atomic_fetch_add(&stream->done_waiters, 1);
  while (atomic_load(&stream->completed_seq) < seq) {
    cnd_wait(&stream->done_cond, &stream->mutex);
  }
  atomic_fetch_sub(&stream->done_waiters, 1);
  mtx_unlock(&stream->mutex);
}

bool hl_host_stream_running_inline(hl_backend_stream_t* stream) {
  return hl_host_inline_stream_ == stream;
}

bool hl_host_stream_is_current(hl_backend_stream_t* stream) {
  return hl_host_inline_stream_ == stream ||
         thrd_equal(thrd_current(), stream->thread) != 0;
}

uint64_t hl_host_stream_record_seq(hl_backend_stream_t* stream) {
  // What this thread ran under a claim comes before the record.
  hl_host_stream_end_claim(stream);
  return atomic_load_explicit(&stream->submitted_seq, memory_order_acquire);
}

bool hl_host_stream_claim(hl_backend_stream_t* stream) {
  if (!stream->inline_work || stream->delay_max_us || hl_host_claimed_stream_) {
    return false;
  }
  uint64_t idle =
      atomic_load_explicit(&stream->completed_seq, memory_order_acquire);
  // As hl_host_stream_run_inline's claim, held until the claim ends.
  if (atomic_load_explicit(&stream->submitted_seq, memory_order_relaxed) !=
          idle ||
      !atomic_compare_exchange_strong_explicit(&stream->submitted_seq, &idle,
                                               idle + 1, memory_order_acq_rel,
                                               memory_order_relaxed)) {
    return false;
  }
  hl_host_claimed_stream_ = stream;
  hl_host_claimed_seq_ = idle + 1;
  return true;
}

void hl_host_stream_unclaim(hl_backend_stream_t* stream) {
  if (hl_host_claimed_stream_ != stream) return;  // A push ended it.
  hl_host_claimed_stream_ = NULL;
  hl_host_stream_complete(stream, hl_host_claimed_seq_);
}

bool hl_host_stream_claim_intact(hl_backend_stream_t* stream) {
  // As hl_host_stream_run_inline's claimed case: not from work running at
  // the claim's point, and nothing queued behind the claim.
  return hl_host_claimed_stream_ == stream &&
         hl_host_inline_stream_ != stream &&
         atomic_load_explicit(&stream->submitted_seq, memory_order_acquire) ==
             hl_host_claimed_seq_;
}

bool hl_host_stream_run_inline(hl_backend_stream_t* stream, hl_host_fn_t fn,
                               void* user) {
  if (!stream->inline_work) return false;
  if (hl_host_claimed_stream_ == stream) {
    // Launched from work running at the claim's point: it goes after that
    // work (queued; it runs once the claim ends).
    if (hl_host_inline_stream_ == stream) return false;
    if (atomic_load_explicit(&stream->submitted_seq, memory_order_acquire) !=
        hl_host_claimed_seq_) {
      // Another thread queued work behind the claim: this goes after it.
      hl_host_stream_end_claim(stream);
      return false;
    }
    // Claimed by this thread and nothing queued since (this thread's own
    // pushes end the claim): the stream's point is here, with no claim of
    // its own.
    hl_backend_stream_t* outer = hl_host_inline_stream_;
    hl_host_inline_stream_ = stream;
    fn(user);
    hl_host_inline_stream_ = outer;
    return true;
  }
  uint64_t idle =
      atomic_load_explicit(&stream->completed_seq, memory_order_acquire);
  if (HL_UNLIKELY(stream->delay_max_us)) {
    // With fault-injection delays, a coin decides, so that stress runs
    // cover both ways of running the runtime's work.
    hl_spinlock_lock(&stream->push_lock);
    bool heads = hl_host_rng_next(&stream->inline_rng) & 1;
    uint64_t delay_rng = hl_host_rng_next(&stream->inline_rng);
    hl_spinlock_unlock(&stream->push_lock);
    if (!heads) return false;
    hl_host_stream_delay(stream, &delay_rng);
    idle = atomic_load_explicit(&stream->completed_seq, memory_order_acquire);
  }
  // Claim the next sequence if nothing is queued or running (submitted ==
  // completed): pushers take theirs with an increment, so exactly one of a
  // racing push and this claim gets idle + 1, and items pushed after the
  // claim run after this work (the worker waits for it).
  if (!atomic_compare_exchange_strong_explicit(&stream->submitted_seq, &idle,
                                               idle + 1, memory_order_acq_rel,
                                               memory_order_relaxed)) {
    return false;
  }
  hl_backend_stream_t* outer = hl_host_inline_stream_;
  hl_host_inline_stream_ = stream;
  fn(user);
  hl_host_inline_stream_ = outer;
  hl_host_stream_complete(stream, idle + 1);
  return true;
}
