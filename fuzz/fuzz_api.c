// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer harness: an API-sequence fuzzer. The input decodes into a small
// program over three queues of a checked host device: alloca, dealloca,
// fill, verify (read back), invocations whose results are fresh, a
// registered global, the argument itself, or (hidden aliasing) another live
// buffer, releases, and waits on failed semaphores.
//
// After each program:
// - no use-after-free was detected (memory stats use_after_free == 0): for
//   programs without hidden aliasing under assume_no_alias=1, and for every
//   program under assume_no_alias=0 (hidden aliasing only runs then);
// - every verify read back the pattern last written;
// - every op that waited on a failed semaphore failed with its status;
// - after teardown the device has zero bytes in use, no live streams, and
//   every live event is in the event pool.
// Every host wait has a deadline; a wait that times out aborts (a hang bug).
//
// Byte layout: byte 0 = flags (bit 0: assume_no_alias), then 3-byte ops
// (opcode, a, b).
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hipline/hipline.h"
#include "runtime/timeline/timeline_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

enum { QUEUES = 3, SLOTS = 8, MAX_OPS = 48, MAX_WORDS = 64 };

#define DEADLINE() hl_deadline_after(INT64_C(5000000000))

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "fuzz_api: check failed at line %d: %s\n", __LINE__, \
              #cond);                                                      \
      abort();                                                             \
    }                                                                      \
  } while (0)

#define CHECK_OK(expr)                                         \
  do {                                                         \
    hl_status_t st_ = (expr);                                  \
    if (st_) {                                                 \
      hl_status_fprint(stderr, "fuzz_api: unexpected: ", st_); \
      fprintf(stderr, "  at line %d: %s\n", __LINE__, #expr);  \
      abort();                                                 \
    }                                                          \
  } while (0)

typedef struct slot_t {
  hl_buffer_t* buffer;
  uint32_t words;
  // Last write: queue semaphore and value (|sem| NULL: nothing pending).
  hl_semaphore_t* sem;
  uint64_t value;
  bool known;  // |pattern| describes the content.
  bool dead;   // Its root has a dealloca: the program must not touch it.
  uint32_t pattern;
} slot_t;

typedef struct program_t {
  hl_device_t* device;
  hl_queue_t* queues[QUEUES];
  hl_semaphore_t* sems[QUEUES];  // One program timeline per queue.
  uint64_t values[QUEUES];
  slot_t slots[SLOTS];
  hl_buffer_t* global;
  uint32_t global_pattern;  // What the global holds (fills may change it).
  bool global_known;
  bool assume_no_alias;
  hl_function_t* fns[4];
} program_t;

typedef enum fn_kind_e {
  FN_FRESH = 0,
  FN_GLOBAL = 1,
  FN_ARGUMENT = 2,
  FN_HIDDEN = 3,
} fn_kind_t;

typedef struct fn_ctx_t {
  program_t* program;
  fn_kind_t kind;
  hl_buffer_t* hidden;  // FN_HIDDEN: a live buffer that is not an argument.
} fn_ctx_t;

static fn_ctx_t fn_ctx_[4];

static hl_status_t program_fn(void* user, hl_queue_t* queue,
                              hl_buffer_t* const* arguments,
                              size_t argument_count,
                              const hl_fence_t* wait_fence,
                              const hl_fence_t* signal_fence,
                              hl_buffer_t** out_results, size_t result_count) {
  fn_ctx_t* ctx = (fn_ctx_t*)user;
  hl_buffer_t* result = NULL;
  switch (ctx->kind) {
    case FN_FRESH: {
      uint64_t length = hl_buffer_length(arguments[0]);
      HL_RETURN_IF_ERROR_PLAIN(
          hl_queue_alloca(queue, wait_fence, NULL, length, 0, &result));
      hl_status_t st = hl_queue_copy(queue, NULL, signal_fence, arguments[0], 0,
                                     result, 0, length);
      if (st) {
        hl_buffer_release(result);
        return st;
      }
      break;
    }
    case FN_GLOBAL:
      result = ctx->program->global;
      hl_buffer_retain(result);
      HL_RETURN_IF_ERROR_PLAIN(
          hl_queue_barrier(queue, wait_fence, signal_fence));
      break;
    case FN_ARGUMENT:
      result = arguments[0];
      hl_buffer_retain(result);
      HL_RETURN_IF_ERROR_PLAIN(
          hl_queue_barrier(queue, wait_fence, signal_fence));
      break;
    case FN_HIDDEN:
      result = ctx->hidden;
      hl_buffer_retain(result);
      HL_RETURN_IF_ERROR_PLAIN(
          hl_queue_barrier(queue, wait_fence, signal_fence));
      break;
  }
  out_results[0] = result;
  return NULL;
}

static hl_fence_t* fence_of(hl_semaphore_t* s, uint64_t v) {
  hl_fence_t* f = NULL;
  CHECK_OK(hl_fence_create(hl_allocator_system(), &f));
  if (s) CHECK_OK(hl_fence_insert(f, s, v));
  return f;
}

// A wait fence for an op on |q| touching slot |s| (its last write).
static hl_fence_t* wait_for(program_t* p, slot_t* s) {
  return fence_of(s->sem, s->value);
}

// The next value on queue |q|'s program timeline, as a signal fence.
static hl_fence_t* next_signal(program_t* p, int q, uint64_t* out_value) {
  *out_value = ++p->values[q];
  return fence_of(p->sems[q], *out_value);
}

static void slot_drop(program_t* p, slot_t* s, bool dealloca, int q) {
  if (!s->buffer) return;
  // The global is deallocated once, at teardown.
  if (hl_buffer_root_id(s->buffer) == hl_buffer_root_id(p->global)) {
    dealloca = false;
  }
  if (dealloca) {
    // May be FAILED_PRECONDITION when the root already has a dealloca
    // (argument-aliased slots share roots); anything else is a bug.
    hl_fence_t* w = wait_for(p, s);
    hl_status_t st = hl_queue_dealloca(p->queues[q], w, NULL, s->buffer);
    CHECK(!st || hl_status_code(st) == HL_STATUS_FAILED_PRECONDITION);
    hl_status_free(st);
    hl_fence_release(w);
    // Other slots sharing the root must not be read any more.
    uint64_t root = hl_buffer_root_id(s->buffer);
    for (int i = 0; i < SLOTS; ++i) {
      if (p->slots[i].buffer && hl_buffer_root_id(p->slots[i].buffer) == root) {
        p->slots[i].known = false;
        p->slots[i].dead = true;
      }
    }
  }
  hl_buffer_release(s->buffer);
  memset(s, 0, sizeof(*s));
}

static bool slot_usable(program_t* p, slot_t* s) {
  return s->buffer && !s->dead && !hl_buffer_is_freed(s->buffer);
}

static void op_alloca(program_t* p, int q, slot_t* s, uint8_t b) {
  slot_drop(p, s, true, q);
  uint64_t v;
  hl_fence_t* f = next_signal(p, q, &v);
  s->words = 1u + b % MAX_WORDS;
  CHECK_OK(
      hl_queue_alloca(p->queues[q], NULL, f, s->words * 4u, 0, &s->buffer));
  hl_fence_release(f);
  s->sem = p->sems[q];
  s->value = v;
  s->known = false;
}

static void op_fill(program_t* p, int q, slot_t* s, uint32_t pattern) {
  if (!slot_usable(p, s) || (!s->known && !s->sem)) return;
  // A write waits for every recorded use of the root (readers included).
  hl_fence_t* w = wait_for(p, s);
  CHECK_OK(hl_buffer_use_fence(s->buffer, w));
  uint64_t v;
  hl_fence_t* f = next_signal(p, q, &v);
  CHECK_OK(
      hl_queue_fill(p->queues[q], w, f, s->buffer, 0, s->words * 4u, pattern));
  hl_fence_release(w);
  hl_fence_release(f);
  // Every slot viewing the same root now holds the pattern.
  uint64_t root = hl_buffer_root_id(s->buffer);
  if (root == hl_buffer_root_id(p->global)) {
    p->global_known = s->words == MAX_WORDS;
    p->global_pattern = pattern;
  }
  for (int i = 0; i < SLOTS; ++i) {
    slot_t* o = &p->slots[i];
    if (o->buffer && hl_buffer_root_id(o->buffer) == root) {
      o->known = o->words == s->words;
      o->pattern = pattern;
      o->sem = p->sems[q];
      o->value = v;
    }
  }
}

static void op_verify(program_t* p, int q, slot_t* s) {
  if (!slot_usable(p, s) || !s->known) return;
  uint32_t host[MAX_WORDS];
  memset(host, 0, sizeof(host));
  hl_fence_t* w = wait_for(p, s);
  // A read waits for the root's last write, whoever made it (a slot holding
  // the global did not see fills through other slots).
  CHECK_OK(hl_buffer_mutation_barrier(s->buffer, w));
  uint64_t v;
  hl_fence_t* f = next_signal(p, q, &v);
  CHECK_OK(
      hl_queue_read(p->queues[q], w, f, s->buffer, 0, host, s->words * 4u));
  CHECK_OK(hl_semaphore_wait(p->sems[q], v, DEADLINE()));
  hl_fence_release(w);
  hl_fence_release(f);
  for (uint32_t i = 0; i < s->words; ++i) {
    if (host[i] != s->pattern) {
      fprintf(stderr,
              "fuzz_api: slot %d (root %llu, %u words) word %u: got %08x, "
              "expected %08x\n",
              (int)(s - p->slots),
              (unsigned long long)hl_buffer_root_id(s->buffer), s->words, i,
              host[i], s->pattern);
    }
    CHECK(host[i] == s->pattern);
  }
}

static void op_invoke(program_t* p, int q, slot_t* arg, slot_t* out,
                      fn_kind_t kind, slot_t* hidden) {
  if (!slot_usable(p, arg) || !arg->known) return;
  if (kind == FN_HIDDEN &&
      (p->assume_no_alias || !hidden->buffer || hidden == arg ||
       hidden == out || !slot_usable(p, hidden) || !hidden->known)) {
    kind = FN_FRESH;
  }
  fn_ctx_[kind].hidden = hidden->buffer;
  hl_invocation_t* inv = NULL;
  CHECK_OK(hl_invocation_create(p->fns[kind], p->queues[q], &inv));
  hl_invocation_set_assume_no_alias(inv, p->assume_no_alias);
  CHECK_OK(hl_invocation_add_argument(inv, arg->buffer));
  if (arg->sem) CHECK_OK(hl_invocation_add_wait(inv, arg->sem, arg->value));
  if (kind == FN_HIDDEN && hidden->sem) {
    CHECK_OK(hl_invocation_add_wait(inv, hidden->sem, hidden->value));
  }
  CHECK_OK(hl_invocation_invoke(inv));
  hl_buffer_t* result = NULL;
  CHECK_OK(hl_invocation_take_result(inv, 0, &result));
  // Chain the invocation's signal into the queue's program timeline.
  uint64_t v;
  hl_fence_t* f = next_signal(p, q, &v);
  CHECK_OK(hl_queue_barrier(p->queues[q], hl_invocation_signal_fence(inv), f));
  hl_fence_release(f);
  hl_invocation_release(inv);
  slot_t copy;
  switch (kind) {
    case FN_GLOBAL:
      copy.words = MAX_WORDS;
      copy.known = p->global_known;
      copy.pattern = p->global_pattern;
      break;
    case FN_HIDDEN:
      copy = *hidden;
      break;
    default:
      copy = *arg;
      break;
  }
  if (out == arg || (kind == FN_HIDDEN && out == hidden)) {
    hl_buffer_release(result);
    return;
  }
  slot_drop(p, out, false, q);
  out->buffer = result;
  out->words = copy.words;
  out->known = copy.known;
  out->pattern = copy.pattern;
  out->sem = p->sems[q];
  out->value = v;
}

// An op that waits on a failed semaphore fails its own signal with the
// failure's code and leaves everything else alone.
static void op_failed_wait(program_t* p, int q, slot_t* s, uint8_t b) {
  hl_semaphore_t* failed = NULL;
  hl_semaphore_t* done = NULL;
  CHECK_OK(hl_semaphore_create(0, hl_allocator_system(), &failed));
  CHECK_OK(hl_semaphore_create(0, hl_allocator_system(), &done));
  hl_fence_t* w = fence_of(failed, 1);
  hl_fence_t* f = fence_of(done, 1);
  if (b & 1) {
    hl_semaphore_fail(failed, hl_status_make(HL_STATUS_ABORTED, __FILE__,
                                             __LINE__, "fuzz failure"));
  }
  if (slot_usable(p, s) && (b & 2)) {
    CHECK_OK(hl_queue_fill(p->queues[q], w, f, s->buffer, 0, s->words * 4u,
                           0xdeadu));
  } else {
    CHECK_OK(hl_queue_barrier(p->queues[q], w, f));
  }
  if (!(b & 1)) {
    hl_semaphore_fail(failed, hl_status_make(HL_STATUS_ABORTED, __FILE__,
                                             __LINE__, "fuzz failure"));
  }
  hl_status_t st = hl_semaphore_wait(done, 1, DEADLINE());
  CHECK(hl_status_code(st) == HL_STATUS_ABORTED);
  hl_status_free(st);
  hl_fence_release(w);
  hl_fence_release(f);
  hl_semaphore_release(failed);
  hl_semaphore_release(done);
}

static hl_function_t* make_fn(program_t* p, fn_kind_t kind) {
  static const hl_access_t access[1] = {HL_ACCESS_READ};
  hl_function_signature_t sig = {1, 1, access};
  fn_ctx_[kind].program = p;
  fn_ctx_[kind].kind = kind;
  hl_function_t* f = NULL;
  CHECK_OK(hl_function_create("fuzz.fn", &sig, program_fn, &fn_ctx_[kind],
                              hl_allocator_system(), &f));
  return f;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  program_t p;
  memset(&p, 0, sizeof(p));
  p.assume_no_alias = data[0] & 1;
  hl_device_options_t o;
  hl_device_options_initialize(&o);
  o.backend = HL_BACKEND_HOST;
  o.checked = getenv("FUZZ_API_UNCHECKED") ? 0 : 1;
  o.fallback = (data[0] & 2) ? HL_FALLBACK_DEVICE_SYNC : HL_FALLBACK_FRONTIER;
  CHECK_OK(hl_device_create(&o, hl_allocator_system(), &p.device));
  for (int q = 0; q < QUEUES; ++q) {
    CHECK_OK(hl_queue_create(p.device, &p.queues[q]));
    CHECK_OK(hl_semaphore_create(0, hl_allocator_system(), &p.sems[q]));
  }
  for (int k = 0; k < 4; ++k) p.fns[k] = make_fn(&p, (fn_kind_t)k);
  // The global: allocated, filled and registered up front.
  {
    uint64_t v;
    hl_fence_t* f = next_signal(&p, 0, &v);
    CHECK_OK(
        hl_queue_alloca(p.queues[0], NULL, NULL, MAX_WORDS * 4, 0, &p.global));
    CHECK_OK(hl_queue_fill(p.queues[0], NULL, f, p.global, 0, MAX_WORDS * 4,
                           0x61061061u));
    CHECK_OK(hl_semaphore_wait(p.sems[0], v, DEADLINE()));
    hl_fence_release(f);
    CHECK_OK(hl_buffer_register_global(p.global));
    p.global_pattern = 0x61061061u;
    p.global_known = true;
  }

  size_t ops = (size - 1) / 3;
  if (ops > MAX_OPS) ops = MAX_OPS;
  for (size_t i = 0; i < ops; ++i) {
    const uint8_t* op = data + 1 + 3 * i;
    int q = op[1] % QUEUES;
    slot_t* s = &p.slots[(op[1] >> 2) % SLOTS];
    slot_t* t = &p.slots[(op[2] >> 3) % SLOTS];
    switch (op[0] % 9) {
      case 0:
        op_alloca(&p, q, s, op[2]);
        break;
      case 1:
        slot_drop(&p, s, true, q);
        break;
      case 2:
        op_fill(&p, q, s, 0x01010101u * op[2]);
        break;
      case 3:
        op_verify(&p, q, s);
        break;
      case 4:
      case 5:
        op_invoke(&p, q, s, t, (fn_kind_t)(op[2] % 4), &p.slots[op[2] % SLOTS]);
        break;
      case 6:
        slot_drop(&p, s, false, q);
        break;
      case 7:
        op_failed_wait(&p, q, s, op[2]);
        break;
      case 8:
        CHECK_OK(hl_queue_wait_idle(p.queues[q], DEADLINE()));
        break;
    }
  }

  // Verify what is known, then tear down.
  for (int i = 0; i < SLOTS; ++i) op_verify(&p, i % QUEUES, &p.slots[i]);
  for (int i = 0; i < SLOTS; ++i) slot_drop(&p, &p.slots[i], i & 1, i % QUEUES);
  CHECK_OK(hl_buffer_unregister_global(p.global));
  CHECK_OK(hl_queue_dealloca(p.queues[0], NULL, NULL, p.global));
  hl_buffer_release(p.global);
  for (int k = 0; k < 4; ++k) hl_function_release(p.fns[k]);
  CHECK_OK(hl_device_wait_idle(p.device, DEADLINE()));
  hl_memory_stats_t ms;
  hl_time_t deadline = DEADLINE();
  for (;;) {
    CHECK_OK(hl_device_memory_stats(p.device, &ms));
    if (ms.bytes_in_use == 0) break;
    CHECK(hl_time_now() < deadline);
    CHECK_OK(hl_device_wait_idle(p.device, DEADLINE()));
  }
  CHECK(ms.use_after_free == 0);
  for (int q = 0; q < QUEUES; ++q) {
    hl_queue_release(p.queues[q]);
    hl_semaphore_release(p.sems[q]);
  }
  // Queue teardown may finish on the completion thread a little later.
  hl_backend_counts_t counts;
  deadline = DEADLINE();
  for (;;) {
    hl_device_flush_work(p.device);
    p.device->backend->vtable->live_counts(p.device->backend, &counts);
    if (counts.live_streams == 0 || hl_time_now() > deadline) break;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  CHECK(counts.live_streams == 0);
  CHECK(counts.live_events == (int64_t)p.device->free_event_count);
  hl_device_release(p.device);
  return 0;
}
