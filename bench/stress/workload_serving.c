// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// serving: R concurrent requests over K queues, each a chain of function
// invocations.
//
// Every step of a request invokes the function "stress.step" on the
// request's queue with the previous step's results as arguments. The
// function checks its arguments against the pattern oracle, allocates M
// fresh results (about half of them subviews of one allocation, the rest
// allocations of their own), fills each with its own seed, and returns
// them. Like a VM frame that still holds its registers, the function keeps a
// reference to every allocation it made until its next call, so a result is
// never provably unique: only assume_no_alias lets it be freed in queue
// order, and with assume_no_alias=0 every result takes the refcount fallback
// (device-sync or frontier). After each invoke the caller releases the
// previous step's results.
//
// With --aliasing P a fraction P of the steps return, as their last result,
// an alias of the registered global or of one of the arguments; hipline's
// safety net must import those sync whatever assume_no_alias says, and the
// oracle checks that nothing was freed early. The final results of every
// request are checked too.
//
// With --escape P a fraction P of the steps hand the raw device address of
// one fresh result out (hl_buffer_device_pointer), as a function that passes
// it to code hipline does not see would: that root escapes, and under the
// ordered fallback it is freed the conservative (frontier) way. The table
// then shows what escape costs.

#include <stdlib.h>
#include <string.h>

#include "bench/stress/stress.h"

#define SERVING_DEFAULT_STEPS 1000
#define SERVING_DEFAULT_QUEUES 4
#define SERVING_DEFAULT_REQUESTS 16
#define SERVING_DEFAULT_RESULTS 4
#define SERVING_DEFAULT_MAX_SIZE (16 * 1024)
#define SERVING_DEFAULT_ALIASING 0.1
#define SERVING_GLOBAL_BYTES 4096

typedef enum serving_alias_e {
  SERVING_ALIAS_NONE = 0,
  SERVING_ALIAS_GLOBAL = 1,
  SERVING_ALIAS_ARGUMENT = 2,
} serving_alias_t;

typedef struct serving_request_t {
  uint32_t queue_index;
  uint32_t count;
  hl_buffer_t* results[HL_FUNCTION_MAX_RESULTS];
  uint32_t seeds[HL_FUNCTION_MAX_RESULTS];
  // The function's frame: references to the allocations of its last call.
  uint32_t frame_count;
  hl_buffer_t* frame[HL_FUNCTION_MAX_RESULTS];
  // Set for the call in progress.
  serving_alias_t alias;
  uint32_t next_seeds[HL_FUNCTION_MAX_RESULTS];
} serving_request_t;

typedef struct serving_t {
  stress_run_t* run;
  uint32_t result_count;
  uint64_t max_size;
  hl_buffer_t* global;
  uint32_t global_seed;
  double escape;  // Fraction of steps that hand a device address out.
  serving_request_t* current;
} serving_t;

// The two functions live for the whole program, so the runtime's alias
// warning ("logged once per function") is logged once, not once per run;
// |serving_current| is the run they serve.
static hl_function_t* serving_first_function;
static hl_function_t* serving_function;
static serving_t* serving_current;

void stress_serving_cleanup(void) {
  hl_function_release(serving_function);
  hl_function_release(serving_first_function);
  serving_function = NULL;
  serving_first_function = NULL;
}

static void serving_frame_release(serving_request_t* req) {
  for (uint32_t i = 0; i < req->frame_count; ++i) {
    hl_buffer_release(req->frame[i]);
    req->frame[i] = NULL;
  }
  req->frame_count = 0;
}

static uint64_t serving_size(serving_t* s) {
  uint64_t size = stress_rng_range(&s->run->rng, 4, s->max_size);
  return (size + 3) & ~(uint64_t)3;
}

// Allocates |size| bytes on the request's queue. The first submission of the
// call takes the invocation's wait fence (|*wait|), later ones queue order.
static hl_status_t serving_alloc(serving_t* s, serving_request_t* req,
                                 const hl_fence_t** wait, uint64_t size,
                                 hl_buffer_t** out_buffer) {
  stress_run_t* run = s->run;
  if (run->policy.alloc == STRESS_ALLOC_SYNC) {
    return stress_run_alloc(run, req->queue_index, size, out_buffer);
  }
  hl_status_t st =
      hl_queue_alloca(run->queues[req->queue_index], *wait,
                      stress_oracle_signal(run->oracle, req->queue_index, NULL),
                      size, 0, out_buffer);
  *wait = NULL;
  return st;
}

static hl_status_t serving_step_fn(void* user, hl_queue_t* queue,
                                   hl_buffer_t* const* arguments,
                                   size_t argument_count,
                                   const hl_fence_t* wait_fence,
                                   const hl_fence_t* signal_fence,
                                   hl_buffer_t** out_results,
                                   size_t result_count) {
  (void)user;
  serving_t* s = serving_current;
  serving_request_t* req = s->current;
  stress_run_t* run = s->run;
  uint32_t qi = req->queue_index;
  const hl_fence_t* wait = wait_fence;
  hl_status_t st = NULL;

  // The previous step's output, checked before anything reuses memory.
  for (size_t a = 0; a < argument_count && !st; ++a) {
    st = stress_oracle_verify(run->oracle, qi, wait, NULL, arguments[a],
                              req->seeds[a]);
    wait = NULL;
  }

  size_t fresh = result_count - (req->alias != SERVING_ALIAS_NONE ? 1 : 0);
  size_t views = fresh >= 2 ? (fresh + 1) / 2 : 0;
  uint64_t sizes[HL_FUNCTION_MAX_RESULTS];
  uint64_t arena_bytes = 0;
  for (size_t i = 0; i < fresh; ++i) {
    sizes[i] = serving_size(s);
    if (i < views) arena_bytes += sizes[i];
  }
  hl_buffer_t* frame[HL_FUNCTION_MAX_RESULTS];
  uint32_t frame_count = 0;
  if (!st && views > 0) {
    hl_buffer_t* arena = NULL;
    st = serving_alloc(s, req, &wait, arena_bytes, &arena);
    if (!st) frame[frame_count++] = arena;
    uint64_t offset = 0;
    for (size_t i = 0; i < views && !st; ++i) {
      st = hl_buffer_subview(arena, offset, sizes[i], &out_results[i]);
      offset += sizes[i];
    }
  }
  for (size_t i = views; i < fresh && !st; ++i) {
    st = serving_alloc(s, req, &wait, sizes[i], &out_results[i]);
    if (!st) {
      hl_buffer_retain(out_results[i]);
      frame[frame_count++] = out_results[i];
    }
  }
  for (size_t i = 0; i < fresh && !st; ++i) {
    req->next_seeds[i] = (uint32_t)stress_rng_next(&run->rng);
    st = stress_oracle_fill(run->oracle, qi, wait, NULL, out_results[i],
                            req->next_seeds[i]);
    wait = NULL;
  }
  if (!st && fresh > 0 && s->escape > 0 &&
      stress_rng_unit(&run->rng) < s->escape) {
    // The address leaves hipline's sight: the root escapes (sticky). On a
    // backend that allocates when the stream gets there the address exists
    // only once the alloca ran, so wait for the result's last write first
    // (what a function handing the address to a foreign library must do).
    hl_buffer_t* escaping = out_results[fresh - 1];
    hl_fence_t* written = NULL;
    st = hl_fence_create(hl_allocator_system(), &written);
    if (!st) st = hl_buffer_mutation_barrier(escaping, written);
    if (!st) st = hl_fence_wait(written, hl_deadline_after(60000000000ll));
    if (written) hl_fence_release(written);
    if (!st && hl_buffer_device_pointer(escaping) == NULL) {
      st = HL_MAKE_STATUS(HL_STATUS_INTERNAL,
                          "serving --escape: a written result has no address");
    }
  }
  if (!st && fresh < result_count) {
    size_t last = result_count - 1;
    if (req->alias == SERVING_ALIAS_ARGUMENT && argument_count > 0) {
      size_t a = (size_t)stress_rng_range(&run->rng, 0, argument_count - 1);
      hl_buffer_retain(arguments[a]);
      out_results[last] = arguments[a];
      req->next_seeds[last] = req->seeds[a];
    } else {
      st = hl_buffer_subview(s->global, 0, SERVING_GLOBAL_BYTES,
                             &out_results[last]);
      req->next_seeds[last] = s->global_seed;
    }
  }
  if (!st) {
    st = hl_queue_barrier(queue, wait,
                          stress_oracle_signal(run->oracle, qi, signal_fence));
  }

  // The frame now holds this call's allocations instead of the last call's.
  serving_frame_release(req);
  memcpy(req->frame, frame, frame_count * sizeof(frame[0]));
  req->frame_count = frame_count;
  return st;
}

// One step of |req|: invoke, take the results, release the previous ones.
static hl_status_t serving_request_step(serving_t* s, hl_function_t* function,
                                        serving_request_t* req, double aliasing,
                                        bool first_call,
                                        stress_result_t* result) {
  stress_run_t* run = s->run;
  hl_invocation_t* inv = NULL;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_invocation_create(function, run->queues[req->queue_index], &inv));
  hl_invocation_set_assume_no_alias(inv, run->policy.assume_no_alias);
  hl_status_t st = NULL;
  for (uint32_t i = 0; i < req->count && !st; ++i) {
    st = hl_invocation_add_argument(inv, req->results[i]);
  }
  if (!st && first_call) {
    // The value the runtime will use and its source, straight from it.
    bool value = true;
    hl_setting_source_t source = HL_SETTING_SOURCE_INVOCATION;
    st = hl_invocation_effective_assume_no_alias(inv, &value, &source);
    result->assume_no_alias = value;
    snprintf(result->assume_no_alias_source,
             sizeof(result->assume_no_alias_source), "%s",
             hl_setting_source_name(source));
  }
  req->alias = SERVING_ALIAS_NONE;
  if (aliasing > 0 && stress_rng_unit(&run->rng) < aliasing) {
    req->alias = req->count > 0 && (stress_rng_next(&run->rng) & 1)
                     ? SERVING_ALIAS_ARGUMENT
                     : SERVING_ALIAS_GLOBAL;
  }
  s->current = req;
  if (!st) st = hl_invocation_invoke(inv);
  hl_buffer_t* next[HL_FUNCTION_MAX_RESULTS] = {NULL};
  uint32_t next_count = 0;
  if (!st) {
    next_count = (uint32_t)hl_invocation_result_count(inv);
    for (uint32_t i = 0; i < next_count && !st; ++i) {
      st = hl_invocation_take_result(inv, i, &next[i]);
    }
  }
  hl_invocation_release(inv);
  if (st) {
    for (uint32_t i = 0; i < next_count; ++i) hl_buffer_release(next[i]);
    return st;
  }
  if (run->policy.alloc == STRESS_ALLOC_SYNC) {
    // The naive baseline: a device sync before memory is given back.
    st = hl_device_wait_idle(run->device, HL_INFINITE_FUTURE);
  }
  for (uint32_t i = 0; i < req->count; ++i) hl_buffer_release(req->results[i]);
  memcpy(req->results, next, sizeof(next));
  memcpy(req->seeds, req->next_seeds, sizeof(req->seeds));
  req->count = next_count;
  return st;
}

hl_status_t stress_workload_serving(const stress_options_t* options,
                                    const stress_policy_t* policy,
                                    stress_result_t* result) {
  result->workload = STRESS_WORKLOAD_SERVING;
  uint32_t k = options->queues ? options->queues : SERVING_DEFAULT_QUEUES;
  uint32_t r = options->requests ? options->requests : SERVING_DEFAULT_REQUESTS;
  uint32_t m = options->results ? options->results : SERVING_DEFAULT_RESULTS;
  uint64_t steps =
      options->iterations ? options->iterations : SERVING_DEFAULT_STEPS;
  double aliasing = options->aliasing;
  // The default run exercises the safety net; an explicit 0 turns it off.
  if (!options->aliasing_set) aliasing = SERVING_DEFAULT_ALIASING;

  stress_run_t run;
  serving_t s;
  memset(&s, 0, sizeof(s));
  s.run = &run;
  s.result_count = m;
  s.max_size = options->max_size ? options->max_size : SERVING_DEFAULT_MAX_SIZE;
  s.escape = options->escape;
  if (s.max_size < 4) s.max_size = 4;
  serving_request_t* requests = NULL;
  hl_function_t* function = NULL;

  hl_status_t st = stress_run_initialize(options, policy, k, result, &run);
  if (!st) {
    requests = calloc(r, sizeof(*requests));
    if (!requests) {
      st = HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED,
                          "allocating %u requests", r);
    }
  }
  hl_access_t access[HL_FUNCTION_MAX_ARGUMENTS];
  for (uint32_t i = 0; i < HL_FUNCTION_MAX_ARGUMENTS; ++i) {
    access[i] = HL_ACCESS_READ;
  }
  // The first step has no arguments; later ones take the M results. M is
  // the same for every run of the program.
  if (!st && !serving_first_function) {
    hl_function_signature_t sig = {0, m, access};
    st = hl_function_create("stress.first_step", &sig, serving_step_fn, NULL,
                            hl_allocator_system(), &serving_first_function);
  }
  if (!st && !serving_function) {
    hl_function_signature_t sig = {m, m, access};
    st = hl_function_create("stress.step", &sig, serving_step_fn, NULL,
                            hl_allocator_system(), &serving_function);
  }
  hl_function_t* first_function = serving_first_function;
  function = serving_function;
  serving_current = &s;
  // The global every aliasing function may return: filled once, registered.
  if (!st) st = stress_run_alloc(&run, 0, SERVING_GLOBAL_BYTES, &s.global);
  if (!st) {
    s.global_seed = (uint32_t)stress_rng_next(&run.rng);
    st = stress_oracle_fill(run.oracle, 0, NULL, NULL, s.global, s.global_seed);
  }
  if (!st) st = hl_buffer_register_global(s.global);
  if (!st) st = hl_queue_wait_idle(run.queues[0], HL_INFINITE_FUTURE);
  for (uint32_t i = 0; requests && i < r; ++i) {
    requests[i].queue_index = i % k;
  }

  uint64_t ops = 0;
  hl_time_t start = hl_time_now();
  for (uint64_t step = 0; !st && !stress_run_done(&run, step, steps); ++step) {
    for (uint32_t i = 0; i < r && !st; ++i) {
      hl_time_t t0 = hl_time_now();
      st = serving_request_step(&s, step == 0 ? first_function : function,
                                &requests[i], aliasing, ops == 0, result);
      stress_latency_record(&run.latency, t0, hl_time_now());
      ++ops;
    }
    stress_progress(&run, stress_run_fraction(&run, step, steps));
  }
  // The last step's output is checked too, then everything is let go.
  for (uint32_t i = 0; requests && i < r; ++i) {
    serving_request_t* req = &requests[i];
    for (uint32_t j = 0; j < req->count; ++j) {
      if (!st) {
        st = stress_oracle_verify(run.oracle, req->queue_index, NULL, NULL,
                                  req->results[j], req->seeds[j]);
      }
      hl_buffer_release(req->results[j]);
      req->results[j] = NULL;
    }
    req->count = 0;
    serving_frame_release(req);
  }
  hl_status_t wst =
      run.device ? hl_device_wait_idle(run.device, HL_INFINITE_FUTURE) : NULL;
  hl_time_t end = hl_time_now();
  st = hl_status_join(st, wst);
  if (run.device) {
    st = hl_status_join(st, stress_run_finish(&run, start, end, ops));
  }
  if (s.global) {
    hl_status_ignore(hl_buffer_unregister_global(s.global));
    hl_status_ignore(hl_queue_dealloca(run.queues[0], NULL, NULL, s.global));
    hl_buffer_release(s.global);
  }
  serving_current = NULL;
  free(requests);
  stress_run_deinitialize(&run);
  return st;
}
