// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Helpers shared by the invocation-layer tests (tests/invocation_*_test.c):
// host devices in checked mode, one-pair fences, blocking read-back with a
// deadline, statistics, and the test functions themselves (callbacks built
// only from queue_alloca, fill, write, copy, read and subviews, so the data a
// result holds is known and can be verified on the host).
//
// Every callback enqueues its work after |wait_fence| and signals
// |signal_fence| with its last submission, as the coarse-fences convention
// asks.
#ifndef HIPLINE_TESTS_INVOCATION_UTIL_H_
#define HIPLINE_TESTS_INVOCATION_UTIL_H_

#include <stdatomic.h>

#include "hipline/buffer.h"
#include "hipline/fence.h"
#include "hipline/invocation.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"
#include "runtime/timeline/timeline_internal.h"
#include "tests/test_util.h"

#define INV_MS ((hl_duration_t)1000000)
#define INV_DEADLINE() hl_deadline_after(20000 * INV_MS)

//===----------------------------------------------------------------------===//
// Devices, queues, fences
//===----------------------------------------------------------------------===//

// A host device in checked mode with the given fallback mode.
static inline hl_device_t* inv_device_create_mode(hl_fallback_mode_t fallback) {
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = hl_test_backend_kind();
  o.checked = 1;
  o.fallback = fallback;
  hl_device_t* d = NULL;
  HL_ASSERT_OK(hl_device_create(&o, hl_allocator_system(), &d));
  return d;
}

static inline hl_device_t* inv_device_create(void) {
  return inv_device_create_mode(HL_FALLBACK_FRONTIER);
}

static inline hl_invocation_stats_t inv_stats(hl_device_t* d) {
  hl_invocation_stats_t s;
  HL_ASSERT_OK(hl_device_invocation_stats(d, &s));
  return s;
}

static inline void inv_wait_idle(hl_device_t* d) {
  HL_ASSERT_OK(hl_device_wait_idle(d, INV_DEADLINE()));
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

// The word at index |i| of data stamped with |seed|: distinct per word, so a
// copy at a wrong offset or a stale block shows up.
static inline uint32_t inv_word(uint32_t seed, uint64_t i) {
  uint32_t x = seed * 0x9E3779B9u + (uint32_t)i * 0x85EBCA6Bu + 0x3C6EF372u;
  x ^= x >> 15;
  return x ? x : 1;
}

// Reads |length| bytes of |buffer| on |queue| (after |wait|, may be NULL) and
// blocks until they arrive; returns the status of the read's signal.
// Safe off the test's main thread (no cmocka asserts).
static inline hl_status_t inv_read_status(hl_queue_t* queue,
                                          const hl_fence_t* wait,
                                          hl_buffer_t* buffer, void* out,
                                          uint64_t length) {
  hl_semaphore_t* s = NULL;
  hl_fence_t* f = NULL;
  hl_status_t st = hl_semaphore_create(0, hl_allocator_system(), &s);
  if (!st) st = hl_fence_create(hl_allocator_system(), &f);
  if (!st) st = hl_fence_insert(f, s, 1);
  if (!st) st = hl_queue_read(queue, wait, f, buffer, 0, out, length);
  if (!st) st = hl_semaphore_wait(s, 1, INV_DEADLINE());
  hl_fence_release(f);
  hl_semaphore_release(s);
  return st;
}

// Asserts every word of |buffer| equals |pattern| (read on |queue|).
static inline void inv_expect_fill(hl_queue_t* queue, const hl_fence_t* wait,
                                   hl_buffer_t* buffer, uint32_t pattern) {
  uint64_t length = hl_buffer_length(buffer);
  uint32_t* words = malloc((size_t)length);
  assert_non_null(words);
  memset(words, 0, (size_t)length);
  HL_ASSERT_OK(inv_read_status(queue, wait, buffer, words, length));
  for (uint64_t i = 0; i < length / 4; ++i) {
    if (words[i] != pattern) {
      uint32_t got = words[i];
      free(words);
      fail_msg("word %llu of a %llu-byte buffer: 0x%08x, expected 0x%08x",
               (unsigned long long)i, (unsigned long long)length, got, pattern);
    }
  }
  free(words);
}

// Asserts |buffer| holds inv_word(|seed|, i) at word i.
static inline void inv_expect_words(hl_queue_t* queue, const hl_fence_t* wait,
                                    hl_buffer_t* buffer, uint32_t seed) {
  uint64_t length = hl_buffer_length(buffer);
  uint32_t* words = malloc((size_t)length);
  assert_non_null(words);
  memset(words, 0, (size_t)length);
  HL_ASSERT_OK(inv_read_status(queue, wait, buffer, words, length));
  for (uint64_t i = 0; i < length / 4; ++i) {
    if (words[i] != inv_word(seed, i)) {
      uint32_t got = words[i];
      free(words);
      fail_msg("word %llu: 0x%08x, expected 0x%08x (seed %u)",
               (unsigned long long)i, got, inv_word(seed, i), seed);
    }
  }
  free(words);
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

static inline hl_function_t* inv_function(const char* name,
                                          uint32_t argument_count,
                                          const hl_access_t* access,
                                          uint32_t result_count,
                                          hl_function_fn_t fn, void* user) {
  hl_function_signature_t sig = {argument_count, result_count, access};
  hl_function_t* f = NULL;
  HL_ASSERT_OK(
      hl_function_create(name, &sig, fn, user, hl_allocator_system(), &f));
  return f;
}

// What the callbacks below need to know; one per function.
typedef struct inv_fn_config_t {
  uint64_t size;     // Bytes per result.
  uint32_t pattern;  // Fill pattern (fresh, two views, global, hidden).
  // fn_hidden / fn_global: where the callback keeps its extra reference
  // (the last call's buffer; the previous one, if any, is released).
  hl_buffer_t* kept;
  atomic_int calls;
} inv_fn_config_t;

static inline void inv_fn_config_init(inv_fn_config_t* c, uint64_t size,
                                      uint32_t pattern) {
  memset(c, 0, sizeof(*c));
  c->size = size;
  c->pattern = pattern;
  atomic_init(&c->calls, 0);
}

// A fresh alloca filled with |pattern|: alloca, fill.
static inline hl_status_t inv_fresh_filled(hl_queue_t* queue,
                                           const hl_fence_t* wait,
                                           const hl_fence_t* signal,
                                           uint64_t size, uint32_t pattern,
                                           hl_buffer_t** out) {
  hl_buffer_t* b = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_alloca(queue, wait, NULL, size, 0, &b));
  hl_status_t st = hl_queue_fill(queue, wait, signal, b, 0, size, pattern);
  if (st) {
    hl_buffer_release(b);
    return st;
  }
  *out = b;
  return NULL;
}

// () -> (fresh buffer filled with pattern). Unique.
static inline hl_status_t inv_fn_fresh(void* user, hl_queue_t* queue,
                                       hl_buffer_t* const* args, size_t nargs,
                                       const hl_fence_t* wait,
                                       const hl_fence_t* signal,
                                       hl_buffer_t** results, size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  inv_fn_config_t* c = (inv_fn_config_t*)user;
  atomic_fetch_add(&c->calls, 1);
  return inv_fresh_filled(queue, wait, signal, c->size, c->pattern,
                          &results[0]);
}

// () -> (view [0, size), view [size, 2*size)) of one fresh 2*size root; the
// first half holds pattern, the second ~pattern. One root, unique.
static inline hl_status_t inv_fn_two_views(void* user, hl_queue_t* queue,
                                           hl_buffer_t* const* args,
                                           size_t nargs, const hl_fence_t* wait,
                                           const hl_fence_t* signal,
                                           hl_buffer_t** results,
                                           size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  inv_fn_config_t* c = (inv_fn_config_t*)user;
  atomic_fetch_add(&c->calls, 1);
  hl_buffer_t* b = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_queue_alloca(queue, wait, NULL, 2 * c->size, 0, &b));
  hl_status_t st = hl_queue_fill(queue, wait, NULL, b, 0, c->size, c->pattern);
  if (!st) {
    st = hl_queue_fill(queue, wait, signal, b, c->size, c->size, ~c->pattern);
  }
  if (!st) st = hl_buffer_subview(b, 0, c->size, &results[0]);
  if (!st) st = hl_buffer_subview(b, c->size, c->size, &results[1]);
  hl_buffer_release(b);
  return st;
}

// () -> (fresh filled buffer) that the callback also keeps in |kept| with an
// extra reference the runtime cannot see (the hazard assume_no_alias
// exists for).
static inline hl_status_t inv_fn_hidden(void* user, hl_queue_t* queue,
                                        hl_buffer_t* const* args, size_t nargs,
                                        const hl_fence_t* wait,
                                        const hl_fence_t* signal,
                                        hl_buffer_t** results,
                                        size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  inv_fn_config_t* c = (inv_fn_config_t*)user;
  atomic_fetch_add(&c->calls, 1);
  hl_buffer_t* b = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      inv_fresh_filled(queue, wait, signal, c->size, c->pattern, &b));
  hl_buffer_release(c->kept);
  hl_buffer_retain(b);
  c->kept = b;
  results[0] = b;
  return NULL;
}

// () -> (fresh filled buffer) that the callback also registers as a global
// (PERSISTENT) and keeps in |kept|.
static inline hl_status_t inv_fn_global(void* user, hl_queue_t* queue,
                                        hl_buffer_t* const* args, size_t nargs,
                                        const hl_fence_t* wait,
                                        const hl_fence_t* signal,
                                        hl_buffer_t** results,
                                        size_t nresults) {
  (void)args;
  (void)nargs;
  (void)nresults;
  inv_fn_config_t* c = (inv_fn_config_t*)user;
  atomic_fetch_add(&c->calls, 1);
  hl_buffer_t* b = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      inv_fresh_filled(queue, wait, signal, c->size, c->pattern, &b));
  hl_status_t st = hl_buffer_register_global(b);
  if (st) {
    hl_buffer_release(b);
    return st;
  }
  hl_buffer_retain(b);
  c->kept = b;
  results[0] = b;
  return NULL;
}

// (arg: read-write) -> (arg): fills the argument with pattern and returns it.
static inline hl_status_t inv_fn_return_arg(
    void* user, hl_queue_t* queue, hl_buffer_t* const* args, size_t nargs,
    const hl_fence_t* wait, const hl_fence_t* signal, hl_buffer_t** results,
    size_t nresults) {
  (void)nargs;
  (void)nresults;
  inv_fn_config_t* c = (inv_fn_config_t*)user;
  atomic_fetch_add(&c->calls, 1);
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_fill(
      queue, wait, signal, args[0], 0, hl_buffer_length(args[0]), c->pattern));
  hl_buffer_retain(args[0]);
  results[0] = args[0];
  return NULL;
}

// (arg: read-write) -> (subview of arg's second half): fills that half.
static inline hl_status_t inv_fn_return_arg_view(
    void* user, hl_queue_t* queue, hl_buffer_t* const* args, size_t nargs,
    const hl_fence_t* wait, const hl_fence_t* signal, hl_buffer_t** results,
    size_t nresults) {
  (void)nargs;
  (void)nresults;
  inv_fn_config_t* c = (inv_fn_config_t*)user;
  atomic_fetch_add(&c->calls, 1);
  uint64_t half = hl_buffer_length(args[0]) / 2;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_queue_fill(queue, wait, signal, args[0], half, half, c->pattern));
  return hl_buffer_subview(args[0], half, half, &results[0]);
}

// (arg: read) -> (fresh copy of arg).
static inline hl_status_t inv_fn_copy(void* user, hl_queue_t* queue,
                                      hl_buffer_t* const* args, size_t nargs,
                                      const hl_fence_t* wait,
                                      const hl_fence_t* signal,
                                      hl_buffer_t** results, size_t nresults) {
  (void)nargs;
  (void)nresults;
  inv_fn_config_t* c = (inv_fn_config_t*)user;
  atomic_fetch_add(&c->calls, 1);
  uint64_t size = hl_buffer_length(args[0]);
  hl_buffer_t* b = NULL;
  HL_RETURN_IF_ERROR_PLAIN(hl_queue_alloca(queue, wait, NULL, size, 0, &b));
  hl_status_t st = hl_queue_copy(queue, wait, signal, args[0], 0, b, 0, size);
  if (st) {
    hl_buffer_release(b);
    return st;
  }
  results[0] = b;
  return NULL;
}

// Invokes |f| on |q| with |nargs| arguments and the per-invocation flag
// |no_alias|; returns the invocation (caller releases it).
static inline hl_invocation_t* inv_invoke(hl_function_t* f, hl_queue_t* q,
                                          hl_buffer_t* const* args,
                                          size_t nargs, bool no_alias) {
  hl_invocation_t* inv = NULL;
  HL_ASSERT_OK(hl_invocation_create(f, q, &inv));
  for (size_t i = 0; i < nargs; ++i) {
    HL_ASSERT_OK(hl_invocation_add_argument(inv, args[i]));
  }
  hl_invocation_set_assume_no_alias(inv, no_alias);
  assert_int_equal(hl_invocation_assume_no_alias(inv), no_alias);
  HL_ASSERT_OK(hl_invocation_invoke(inv));
  return inv;
}

static inline hl_buffer_t* inv_take(hl_invocation_t* inv, size_t index) {
  hl_buffer_t* b = NULL;
  HL_ASSERT_OK(hl_invocation_take_result(inv, index, &b));
  assert_non_null(b);
  return b;
}

static inline void inv_wait_signal(hl_invocation_t* inv) {
  HL_ASSERT_OK(hl_fence_wait(hl_invocation_signal_fence(inv), INV_DEADLINE()));
}

#endif  // HIPLINE_TESTS_INVOCATION_UTIL_H_
