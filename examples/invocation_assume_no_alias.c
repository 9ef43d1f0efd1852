// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Invocations and assume_no_alias: how hipline frees what a function returns.
//
// A function returns result buffers. When the caller drops a result, hipline
// frees it in queue order (an "async import") if it can prove nobody else
// holds it, or if the invocation's assume_no_alias says so; otherwise the
// result takes the safe fallback (a "sync import"). Two functions show both:
// "example.clone" keeps nothing, so its result is provably unique;
// "example.cached_clone" keeps its last result in a cache (as a model keeps
// its KV cache), so its result is not, and the invocation turns
// assume_no_alias off to stay safe. See docs/freeing.md.
//
//   build/bin/example_invocation_assume_no_alias
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "examples/example.h"

enum { kWords = 4096 };

typedef struct cache_t {
  hl_buffer_t* last;  // A reference the invocation layer cannot see.
} cache_t;

// The callback (coarse fences: the first step waits on |wait_fence|, the last
// signals |signal_fence|): a fresh buffer, then a copy of the argument into it.
// With a cache (|user|) it keeps a reference to its result.
static hl_status_t clone_fn(void* user, hl_queue_t* queue,
                            hl_buffer_t* const* arguments,
                            size_t argument_count, const hl_fence_t* wait_fence,
                            const hl_fence_t* signal_fence,
                            hl_buffer_t** out_results, size_t result_count) {
  (void)argument_count, (void)result_count;
  cache_t* cache = user;
  uint64_t length = hl_buffer_length(arguments[0]);
  hl_semaphore_t* step = NULL;
  hl_fence_t* allocated = NULL;
  hl_buffer_t* result = NULL;
  hl_status_t st = hl_semaphore_create(0, hl_allocator_system(), &step);
  if (!st) st = hl_fence_create(hl_allocator_system(), &allocated);
  if (!st) st = hl_fence_insert(allocated, step, 1);
  if (!st)
    st = hl_queue_alloca(queue, wait_fence, allocated, length, 0, &result);
  if (!st) {
    st = hl_queue_copy(queue, allocated, signal_fence, arguments[0], 0, result,
                       0, length);
  }
  hl_fence_release(allocated);
  hl_semaphore_release(step);
  if (st) {
    hl_buffer_release(result);
    return st;
  }
  if (cache) {
    hl_buffer_release(cache->last);
    hl_buffer_retain(result);
    cache->last = result;
  }
  out_results[0] = result;
  return NULL;
}

static hl_function_t* make_function(const char* name, cache_t* cache) {
  static const hl_access_t access[1] = {HL_ACCESS_READ};
  hl_function_signature_t signature = {1, 1, access};
  hl_function_t* function = NULL;
  CHECK_OK(hl_function_create(name, &signature, clone_fn, cache,
                              hl_allocator_system(), &function));
  return function;
}

// Invokes |function| on |input| and checks that the result holds |expected|.
// Returns the result (the caller owns it) and whether it ran with
// assume_no_alias.
static hl_buffer_t* invoke(hl_function_t* function, hl_queue_t* queue,
                           hl_buffer_t* input, bool assume_no_alias,
                           const uint32_t* expected, bool* out_effective) {
  hl_invocation_t* invocation = NULL;
  CHECK_OK(hl_invocation_create(function, queue, &invocation));
  CHECK_OK(hl_invocation_add_argument(invocation, input));
  hl_invocation_set_assume_no_alias(invocation, assume_no_alias);
  hl_setting_source_t source;
  CHECK_OK(hl_invocation_effective_assume_no_alias(invocation, out_effective,
                                                   &source));
  printf("%s: assume_no_alias=%d (from the %s)\n", hl_function_name(function),
         *out_effective, hl_setting_source_name(source));
  CHECK_OK(hl_invocation_invoke(invocation));
  hl_buffer_t* result = NULL;
  CHECK_OK(hl_invocation_take_result(invocation, 0, &result));

  // Read the result back after the invocation's work.
  static uint32_t words[kWords];
  memset(words, 0, sizeof(words));
  hl_semaphore_t* read = NULL;
  CHECK_OK(hl_semaphore_create(0, hl_allocator_system(), &read));
  hl_fence_t* read_done = example_fence(read, 1);
  CHECK_OK(hl_queue_read(queue, hl_invocation_signal_fence(invocation),
                         read_done, result, 0, words, sizeof(words)));
  CHECK_OK(hl_fence_wait(read_done, HL_INFINITE_FUTURE));
  CHECK_TRUE(memcmp(words, expected, sizeof(words)) == 0,
             "%s returned other bytes than its argument's",
             hl_function_name(function));
  hl_fence_release(read_done);
  hl_semaphore_release(read);
  hl_invocation_release(invocation);
  return result;
}

static hl_invocation_stats_t stats_of(hl_device_t* device) {
  hl_invocation_stats_t stats;
  CHECK_OK(hl_device_invocation_stats(device, &stats));
  return stats;
}

int main(void) {
  hl_device_t* device = NULL;
  CHECK_OK(hl_device_create(NULL, hl_allocator_system(), &device));
  hl_queue_t* queue = NULL;
  CHECK_OK(hl_queue_create(device, &queue));

  static uint32_t data[kWords];
  for (uint32_t i = 0; i < kWords; ++i) data[i] = i * 2654435761u;
  hl_semaphore_t* ready = NULL;
  CHECK_OK(hl_semaphore_create(0, hl_allocator_system(), &ready));
  hl_fence_t *allocated = example_fence(ready, 1),
             *written = example_fence(ready, 2);
  hl_buffer_t* input = NULL;
  CHECK_OK(hl_queue_alloca(queue, NULL, allocated, sizeof(data), 0, &input));
  CHECK_OK(
      hl_queue_write(queue, allocated, written, data, input, 0, sizeof(data)));
  CHECK_OK(
      hl_fence_wait(written, HL_INFINITE_FUTURE));  // |data| is ours again.

  // A provably unique result is freed in queue order whatever the flag says.
  hl_function_t* clone = make_function("example.clone", NULL);
  bool no_alias = false;
  hl_buffer_t* unique = invoke(clone, queue, input, true, data, &no_alias);
  hl_invocation_stats_t s = stats_of(device);
  CHECK_TRUE(s.async_imports == 1 && s.sync_imports == 0,
             "a unique result: %llu async, %llu sync imports",
             (unsigned long long)s.async_imports,
             (unsigned long long)s.sync_imports);
  hl_buffer_release(unique);  // A queue-ordered free: no host wait.
  CHECK_TRUE(stats_of(device).async_deallocs == 1, "no queue-ordered free");

  // A result the function also keeps: with assume_no_alias off it takes the
  // fallback, freed only once the cache lets go of it too.
  cache_t cache = {NULL};
  hl_function_t* cached = make_function("example.cached_clone", &cache);
  hl_buffer_t* shared = invoke(cached, queue, input, false, data, &no_alias);
  s = stats_of(device);
  uint64_t want_async = no_alias ? 2 : 1;  // HIPLINE_ASSUME_NO_ALIAS wins.
  CHECK_TRUE(s.async_imports == want_async && s.sync_imports == 2 - want_async,
             "a kept result: %llu async, %llu sync imports",
             (unsigned long long)s.async_imports,
             (unsigned long long)s.sync_imports);
  hl_buffer_release(shared);
  if (!no_alias) {
    CHECK_TRUE(!hl_buffer_is_freed(cache.last), "freed while still cached");
  }
  hl_buffer_release(cache.last);  // The last reference: now it goes.
  CHECK_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));

  CHECK_OK(hl_queue_dealloca(queue, NULL, NULL, input));
  hl_buffer_release(input);
  CHECK_OK(hl_device_wait_idle(device, HL_INFINITE_FUTURE));
  hl_memory_stats_t memory;
  CHECK_OK(hl_device_memory_stats(device, &memory));
  CHECK_TRUE(memory.bytes_in_use == 0, "%llu bytes still in use",
             (unsigned long long)memory.bytes_in_use);
  uint64_t fallback = memory.fallback_releases_ordered +
                      memory.fallback_releases_frontier +
                      memory.fallback_releases_device_sync;
  CHECK_TRUE(fallback == s.sync_imports, "%llu fallback releases",
             (unsigned long long)fallback);
  printf("async imports %llu, sync imports %llu, fallback releases %llu\n",
         (unsigned long long)s.async_imports,
         (unsigned long long)s.sync_imports, (unsigned long long)fallback);
  hl_function_release(clone);
  hl_function_release(cached);
  hl_fence_release(allocated);
  hl_fence_release(written);
  hl_semaphore_release(ready);
  hl_queue_release(queue);
  hl_device_release(device);
  return 0;
}
