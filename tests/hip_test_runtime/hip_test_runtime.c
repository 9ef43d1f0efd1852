// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The hip test runtime: an asynchronous model of the HIP that hipline uses.
// TEST CODE ONLY: built as libamdhip64.so under the build tree for ctest and
// never installed or shipped. See hip_test_runtime.h for the variants and
// environment variables.
//
// What is modelled, and from where in ROCm's source (ROCm/clr, hipamd/src
// and rocclr/) the rule comes:
// - Every stream has a worker thread that runs its operations in order, so
//   work completes after the call that enqueued it returns, and events
//   complete later (hipEventQuery answers hipErrorNotReady until then).
// - hipStreamAddCallback and hipLaunchHostFunc run on ONE runtime callback
//   thread, and the stream does not advance until the callback returns
//   (rocclr/device/rocm/rocvirtual.cpp: the callback marker "Blocks AQL
//   queue"). A callback that waits for work behind it on its own stream,
//   or for a lock held by a thread blocked in HIP, deadlocks as on ROCm.
// - hipMemcpyAsync to or from pageable host memory returns only once the
//   copy has executed (hip_memory.cpp, ihipMemcpy: isHostAsync = false, then
//   awaitCompletion); pinned memory (hipHostMalloc, hipHostRegister) and
//   device memory are truly asynchronous.
// - hipMemsetD32Async writes with the device, so its destination must be
//   memory the device reaches: device memory or pinned host memory. Pageable
//   host memory is refused with hipErrorInvalidValue, as CUDA refused it on
//   an H200 (pageableMemoryAccess 0; through the HIP-on-CUDA bridge,
//   2026-11-27); ROCm without XNACK faults instead. Either way it never
//   writes, and a test that relies on it would pass here and fail there.
// - Pools (hip_mempool_impl.{hpp,cpp}): a freed block goes to the free heap
//   with its allocating stream as the only safe stream (MemoryTimestamp's
//   constructor; AddSafeStream never adds the freeing stream, its test is
//   inverted) and a marker on the freeing stream. Heap::FindMemory reuses a
//   block for |stream| when IsSafeFind: |stream| is the allocating stream
//   (whether or not the free has executed), or the pool is opportunistic
//   and the marker has completed. Sizes: ROCm >= 6 takes a block within
//   12.5% above the request; ROCm 5.2 any block at least as large.
//   Stream and device synchronization release completed free blocks above
//   the release threshold (ReleaseFreedMemory); hipMemPoolTrimTo releases
//   completed blocks down to its argument. hipStreamDestroy removes the
//   stream from the safe lists (RemoveStream).
// - Device checks: hipModuleGetFunction aborts when the calling thread's
//   device is not the module's (hip_code_object.hpp, CheckDeviceIdMatch:
//   guarantee(false, "Device mismatch from where this module is loaded"));
//   here that prints and aborts, so the test fails loudly. hipEventRecord
//   on another device's stream fails with hipErrorInvalidHandle, and a
//   launch of a function on another device's stream hipErrorInvalidDevice.
// - Kernels: hipModuleLoadData accepts an AMDGPU ELF or a clang offload
//   bundle with code for the current device's processor (else
//   hipErrorNoBinaryForGpu, as ROCm) and resolves each kernel of kernels/host/
//   whose name the image contains; hipModuleLaunchKernel copies the arguments
//   at launch, using the kernel's parameter sizes, and runs the host reference
//   kernel on the stream's worker. A user code object's kernels run their host
//   twins (trt_twins.h) the same way.
// - Peers: hipDeviceCanAccessPeer follows HL_HIP_TEST_RUNTIME_PEERS; a pool's
//   memory is reachable from another device only after hipMemPoolSetAccess
//   grants it, and a copy, fill or built-in kernel whose stream's device does
//   not reach its memory fails with hipErrorIllegalAddress (see "Peers").
// - Targets: every device reports gfx90a:sramecc+:xnack-, or the entry of
//   HL_HIP_TEST_RUNTIME_TARGETS (comma-separated, one per device; the last
//   one repeats) for it.

#include "tests/hip_test_runtime/hip_test_runtime.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <threads.h>
#include <time.h>

#include "kernels/host/host_kernels.h"
#include "runtime/backend/hip/hip_types.h"
#include "tests/hip_test_runtime/call_counts.h"
#include "tests/hip_test_runtime/trt_twins.h"

#define TRT_EXPORT __attribute__((visibility("default")))

#if HL_TRT_NO_GRAPH
// A HIP library without the graph entries (the symbol table's optional
// hipStreamBeginCapture ... hipGraphDestroy): they are built under other
// names, so the backend's dlsym finds none of them and command buffers
// replay on the stream.
#define hipStreamBeginCapture trt_absent_hipStreamBeginCapture
#define hipStreamEndCapture trt_absent_hipStreamEndCapture
#define hipGraphInstantiate trt_absent_hipGraphInstantiate
#define hipGraphLaunch trt_absent_hipGraphLaunch
#define hipGraphExecDestroy trt_absent_hipGraphExecDestroy
#define hipGraphDestroy trt_absent_hipGraphDestroy
#endif

// Every entry point of the backend's table, declared with the table's own
// types so a definition below that disagrees with the table fails to build.
#define HL_HIP_PFN(kind, return_type, name, params) \
  TRT_EXPORT return_type name params;
#include "runtime/backend/hip/dynamic_symbol_table.h"
#undef HL_HIP_PFN
TRT_EXPORT hipError_t hipHostRegister(void* ptr, size_t size,
                                      unsigned int flags);
TRT_EXPORT hipError_t hipHostUnregister(void* ptr);
TRT_EXPORT void hlTestRuntimeGetCounters(hl_trt_counters_t* out);

// The call counter's entries (tests/hip_test_runtime/call_counts.h): every
// entry of the table, then those the table does not name.
#define TRT_EXTRA_ENTRIES(X) X(hipHostRegister) X(hipHostUnregister)
enum {
#define HL_HIP_PFN(kind, return_type, name, params) TRT_CALL_##name,
#include "runtime/backend/hip/dynamic_symbol_table.h"
#undef HL_HIP_PFN
#define TRT_ENTRY_ENUM(name) TRT_CALL_##name,
  TRT_EXTRA_ENTRIES(TRT_ENTRY_ENUM)
#undef TRT_ENTRY_ENUM
      TRT_CALL_COUNT
};
const char* const hl_call_counts_names[] = {
#define HL_HIP_PFN(kind, return_type, name, params) #name,
#include "runtime/backend/hip/dynamic_symbol_table.h"
#undef HL_HIP_PFN
#define TRT_ENTRY_NAME(name) #name,
    TRT_EXTRA_ENTRIES(TRT_ENTRY_NAME)
#undef TRT_ENTRY_NAME
};
const size_t hl_call_counts_name_count = TRT_CALL_COUNT;
#define TRT_COUNT(name) hl_call_counts_add(TRT_CALL_##name)

// The runtime's own threads are named "trt-..." (its stream workers and
// callback thread).
bool hl_call_counts_library_thread(const char* thread_name) {
  return strncmp(thread_name, "trt-", 4) == 0;
}

#ifndef HL_TRT_ROCM_MAJOR
#define HL_TRT_ROCM_MAJOR 6
#define HL_TRT_ROCM_MINOR 2
#endif

enum {
  hipErrorStreamCaptureUnsupported = 900,
  hipErrorStreamCaptureInvalidated = 901,
  hipErrorInvalidImage = 200,
  hipErrorInvalidHandle = 400,
  hipErrorNotFound = 500,
  hipErrorPeerAccessUnsupported = 217,
  hipErrorNoBinaryForGpu = 209,
  hipErrorIllegalAddress = 700,
  hipErrorPeerAccessAlreadyEnabled = 704,
};

#define TRT_MAX_DEVICES 4

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

typedef struct trt_token_t {
  int refs;  // Under trt.mutex.
  bool done;
  int64_t time_ns;
} trt_token_t;

typedef enum trt_op_kind_e {
  TRT_OP_KERNEL,
  TRT_OP_COPY,
  TRT_OP_SET32,
  TRT_OP_HOST_FN,
  TRT_OP_WAIT,
  TRT_OP_RECORD,
  TRT_OP_FREE,
} trt_op_kind_t;

struct trt_block_t;

typedef struct trt_op_t {
  struct trt_op_t* next;
  trt_op_kind_t kind;
  uint64_t seq;
  union {
    struct {
      const hl_host_kernel_t* kernel;
      hl_launch_config_t config;
      void* params[16];
      unsigned char storage[16 * 16];
      // A user kernel's host twin (then |kernel| is NULL) and its kernarg
      // segment (owned by the op).
      const hl_host_kernel_info_t* twin;
      unsigned char* kernarg;
    } kernel;
    struct {
      void* dst;
      const void* src;
      size_t size;
    } copy;
    struct {
      uint32_t* dst;
      uint32_t value;
      size_t count;
    } set;
    struct {
      hipHostFn_t fn;
      hipStreamCallback_t callback;
      hipStream_t stream;
      void* user;
    } host;
    trt_token_t* token;  // WAIT, RECORD, FREE.
  } u;
} trt_op_t;

struct hl_ihipStream_t {
  uint32_t magic;
  int device;
  thrd_t worker;
  trt_op_t* head;
  trt_op_t* tail;
  uint64_t enqueued;
  uint64_t completed;
  bool exiting;
  struct hl_ihipGraph_t* capture;  // Capturing into it (under trt.mutex).
};
#define TRT_STREAM_MAGIC 0x5354524du

// A graph made by stream capture: its nodes are the captured kernel, copy
// and memset operations, each depending on the one before (a captured
// stream is a chain). An executable graph holds its own copy.
struct hl_ihipGraph_t {
  uint32_t magic;
  int device;
  struct trt_op_t* head;
  struct trt_op_t* tail;
  int node_count;
};
#define TRT_GRAPH_MAGIC 0x47525048u
struct hl_ihipGraphExec_t {
  uint32_t magic;
  int device;
  struct trt_op_t* head;
  int node_count;
};
#define TRT_GRAPH_EXEC_MAGIC 0x47455845u

struct hl_ihipEvent_t {
  uint32_t magic;
  int device;
  unsigned flags;
  trt_token_t* token;  // NULL until recorded.
};
#define TRT_EVENT_MAGIC 0x4556544du

typedef struct trt_block_t {
  struct trt_block_t* next;  // In trt.blocks.
  struct hl_ihipMemPool_t* pool;
  char* ptr;
  size_t size;
  bool busy;
  hipStream_t safe_stream;  // The allocating stream; NULL once destroyed.
  trt_token_t* marker;      // The free's marker; NULL when none.
  hipStream_t free_stream;  // The stream the free was enqueued on.
} trt_block_t;

struct hl_ihipMemPool_t {
  uint32_t magic;
  int device;
  // Devices other than |device| granted access (hipMemPoolSetAccess), one
  // bit per ordinal; under trt.mutex.
  unsigned access;
  uint64_t release_threshold;
  int reuse[3];
  uint64_t busy_bytes, busy_high;
  uint64_t free_bytes, reserved_high;
};
#define TRT_POOL_MAGIC 0x504f4f4cu

struct hl_ihipModule_t {
  uint32_t magic;
  int device;
  bool has[HL_KERNEL_COUNT];
  struct hl_ihipFunction_t* functions[HL_KERNEL_COUNT];  // Owned.
  void* image;  // A copy, for resolving user kernels (twins).
  size_t image_size;
  struct hl_ihipFunction_t* twins;  // Owned, linked through |next_twin|.
};
#define TRT_MODULE_MAGIC 0x4d4f444cu

struct hl_ihipFunction_t {
  uint32_t magic;
  struct hl_ihipModule_t* module;
  const hl_host_kernel_t* kernel;
  const hl_host_kernel_info_t* twin;  // A user kernel: its host twin.
  struct hl_ihipFunction_t* next_twin;
};
#define TRT_FUNCTION_MAGIC 0x46554e43u

typedef struct trt_range_t {
  struct trt_range_t* next;
  char* ptr;
  size_t size;
  bool owned;  // hipHostMalloc (true) or hipHostRegister (false).
} trt_range_t;

typedef struct trt_callback_job_t {
  struct trt_callback_job_t* next;
  trt_op_t* op;
  bool done;
} trt_callback_job_t;

static struct {
  mtx_t mutex;
  cnd_t cond;  // Broadcast on every enqueue and completion.
  int device_count;
  uint64_t memory_bytes;
  unsigned delay_us;
  int version;
  bool blocking_reuse;
  struct hl_ihipMemPool_t default_pools[TRT_MAX_DEVICES];
  uint64_t device_reserved[TRT_MAX_DEVICES];
  trt_block_t* blocks;
  trt_range_t* pinned;
  trt_callback_job_t* jobs_head;
  trt_callback_job_t* jobs_tail;
  bool callback_thread_started;
  hl_trt_counters_t counters;
  hipStream_t streams[256];  // Live streams, for hipDeviceSynchronize.
  int stream_count;
  char targets[TRT_MAX_DEVICES][64];  // gcnArchName per device.
  // Peers (HL_HIP_TEST_RUNTIME_PEERS): bit j of |peer_capable[i]| when
  // device i can access device j; |peer_enabled[i]| what device i enabled
  // with hipDeviceEnablePeerAccess. Under trt.mutex.
  unsigned peer_capable[TRT_MAX_DEVICES];
  unsigned peer_enabled[TRT_MAX_DEVICES];
  int max_streams;  // hipStreamCreate* fails beyond this many live streams.
} trt;

static once_flag trt_once = ONCE_FLAG_INIT;
static _Thread_local int trt_current_device;
static _Thread_local unsigned trt_rand_state;

static _Noreturn void trt_die(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "hip test runtime: ");
  vfprintf(stderr, format, args);
  fprintf(stderr, "\n");
  va_end(args);
  fflush(stderr);
  abort();
}

static uint64_t trt_env_u64(const char* name, uint64_t fallback, uint64_t lo,
                            uint64_t hi) {
  const char* text = getenv(name);
  if (!text || !*text) return fallback;
  char* end = NULL;
  errno = 0;
  unsigned long long value = strtoull(text, &end, 10);
  if (errno || *end || value < lo || value > hi) {
    trt_die("%s=\"%s\": expected an integer in [%llu, %llu]", name, text,
            (unsigned long long)lo, (unsigned long long)hi);
  }
  return value;
}

// HL_HIP_TEST_RUNTIME_TARGETS: one gcnArchName per device.
static void trt_parse_targets(const char* list) {
  const char* last = "gfx90a:sramecc+:xnack-";
  for (int i = 0; i < TRT_MAX_DEVICES; ++i) {
    if (list && *list) {
      size_t n = strcspn(list, ",");
      if (n == 0 || n >= sizeof(trt.targets[i])) {
        trt_die("HL_HIP_TEST_RUNTIME_TARGETS: empty or over-long entry %d", i);
      }
      memcpy(trt.targets[i], list, n);
      trt.targets[i][n] = '\0';
      list += n + (list[n] == ',');
    } else {
      snprintf(trt.targets[i], sizeof(trt.targets[i]), "%s", last);
    }
    last = trt.targets[i];
  }
}

// HL_HIP_TEST_RUNTIME_PEERS: "all" (the default), "none", or the pairs
// that can access each other, "0-1,2-3" (both ways).
static void trt_parse_peers(const char* list) {
  bool all = !list || !*list || strcmp(list, "all") == 0;
  for (int i = 0; i < TRT_MAX_DEVICES; ++i) {
    trt.peer_capable[i] = all ? (1u << TRT_MAX_DEVICES) - 1u : 1u << i;
  }
  if (all || strcmp(list, "none") == 0) return;
  for (const char* p = list; *p;) {
    unsigned a = 0, b = 0;
    int used = 0;
    if (sscanf(p, "%u-%u%n", &a, &b, &used) != 2 || a >= TRT_MAX_DEVICES ||
        b >= TRT_MAX_DEVICES || a == b || (p[used] && p[used] != ',')) {
      trt_die(
          "HL_HIP_TEST_RUNTIME_PEERS=\"%s\": expected all, none or "
          "pairs A-B,... of ordinals below %d",
          list, TRT_MAX_DEVICES);
    }
    trt.peer_capable[a] |= 1u << b;
    trt.peer_capable[b] |= 1u << a;
    p += used + (p[used] == ',');
  }
}

static void trt_initialize(void) {
  mtx_init(&trt.mutex, mtx_plain);
  cnd_init(&trt.cond);
  trt.device_count =
      (int)trt_env_u64("HL_HIP_TEST_RUNTIME_DEVICES", 1, 1, TRT_MAX_DEVICES);
  trt.memory_bytes = trt_env_u64("HL_HIP_TEST_RUNTIME_MEMORY_BYTES",
                                 (uint64_t)1 << 30, 4096, (uint64_t)1 << 40);
  trt.delay_us =
      (unsigned)trt_env_u64("HL_HIP_TEST_RUNTIME_DELAY_US", 0, 0, 100000);
  trt.blocking_reuse =
      trt_env_u64("HL_HIP_TEST_RUNTIME_BLOCKING_REUSE", 0, 0, 1) != 0;
  trt.max_streams = (int)trt_env_u64(
      "HL_HIP_TEST_RUNTIME_MAX_STREAMS", 256, 1,
      (uint64_t)(sizeof(trt.streams) / sizeof(trt.streams[0])));
  int major = HL_TRT_ROCM_MAJOR, minor = HL_TRT_ROCM_MINOR;
  const char* version = getenv("HL_HIP_TEST_RUNTIME_VERSION");
  if (version && *version) {
    char tail = 0;
    if (sscanf(version, "%d.%d%c", &major, &minor, &tail) != 2 || major < 1 ||
        minor < 0 || minor > 99) {
      trt_die("HL_HIP_TEST_RUNTIME_VERSION=\"%s\": expected MAJOR.MINOR",
              version);
    }
  }
  // HIP encodes major * 10^7 + minor * 10^5 + patch.
  trt.version = major * 10000000 + minor * 100000;
  trt_parse_targets(getenv("HL_HIP_TEST_RUNTIME_TARGETS"));
  trt_parse_peers(getenv("HL_HIP_TEST_RUNTIME_PEERS"));
  for (int i = 0; i < TRT_MAX_DEVICES; ++i) {
    struct hl_ihipMemPool_t* pool = &trt.default_pools[i];
    pool->magic = TRT_POOL_MAGIC;
    pool->device = i;
    for (int j = 0; j < 3; ++j) pool->reuse[j] = 1;
  }
}

static void trt_init(void) { call_once(&trt_once, trt_initialize); }

static int64_t trt_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void trt_random_delay(void) {
  if (!trt.delay_us) return;
  if (!trt_rand_state) {
    trt_rand_state = (unsigned)trt_now_ns() | 1u;
  }
  trt_rand_state = trt_rand_state * 1103515245u + 12345u;
  unsigned us = (trt_rand_state >> 8) % (trt.delay_us + 1);
  struct timespec t = {0, (long)us * 1000};
  thrd_sleep(&t, NULL);
}

static trt_token_t* trt_token_new(void) {
  trt_token_t* token = calloc(1, sizeof(*token));
  if (!token) trt_die("out of host memory");
  token->refs = 1;
  return token;
}

// Under trt.mutex.
static void trt_token_release_locked(trt_token_t* token) {
  if (token && --token->refs == 0) free(token);
}

static bool trt_stream_valid(hipStream_t stream) {
  return stream && stream->magic == TRT_STREAM_MAGIC;
}

// Whether |stream| is capturing: the entries whose work a graph of
// hipline's cannot hold (events, host functions, allocation,
// synchronization) refuse it, as HIP refuses what it cannot capture.
static bool trt_capturing(hipStream_t stream) {
  if (!trt_stream_valid(stream)) return false;
  mtx_lock(&trt.mutex);
  bool capturing = stream->capture != NULL;
  mtx_unlock(&trt.mutex);
  return capturing;
}

static bool trt_event_valid(hipEvent_t event) {
  return event && event->magic == TRT_EVENT_MAGIC;
}

//===----------------------------------------------------------------------===//
// The callback thread and stream workers
//===----------------------------------------------------------------------===//

static int trt_callback_main(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, (unsigned long)"trt-callback", 0ul, 0ul, 0ul);
  mtx_lock(&trt.mutex);
  for (;;) {
    while (!trt.jobs_head) cnd_wait(&trt.cond, &trt.mutex);
    trt_callback_job_t* job = trt.jobs_head;
    trt.jobs_head = job->next;
    if (!trt.jobs_head) trt.jobs_tail = NULL;
    trt.counters.host_callbacks++;
    mtx_unlock(&trt.mutex);
    trt_op_t* op = job->op;
    if (op->u.host.fn) {
      op->u.host.fn(op->u.host.user);
    } else {
      op->u.host.callback(op->u.host.stream, hipSuccess, op->u.host.user);
    }
    mtx_lock(&trt.mutex);
    job->done = true;
    cnd_broadcast(&trt.cond);
  }
  return 0;
}

// Runs a host callback on the runtime's one callback thread and blocks the
// calling stream worker until it returns.
static void trt_run_callback(trt_op_t* op) {
  trt_callback_job_t job = {.op = op};
  mtx_lock(&trt.mutex);
  if (!trt.callback_thread_started) {
    thrd_t thread;
    if (thrd_create(&thread, trt_callback_main, NULL) != thrd_success) {
      trt_die("cannot start the callback thread");
    }
    thrd_detach(thread);
    trt.callback_thread_started = true;
  }
  if (trt.jobs_tail) {
    trt.jobs_tail->next = &job;
  } else {
    trt.jobs_head = &job;
  }
  trt.jobs_tail = &job;
  cnd_broadcast(&trt.cond);
  while (!job.done) cnd_wait(&trt.cond, &trt.mutex);
  mtx_unlock(&trt.mutex);
}

static void trt_execute(trt_op_t* op) {
  switch (op->kind) {
    case TRT_OP_KERNEL:
      if (op->u.kernel.twin) {
        const hl_launch_config_t* c = &op->u.kernel.config;
        hl_host_launch_t launch = {{c->grid.x, c->grid.y, c->grid.z},
                                   {c->block.x, c->block.y, c->block.z},
                                   c->shared_bytes};
        op->u.kernel.twin->entry(op->u.kernel.kernarg, &launch);
      } else {
        op->u.kernel.kernel->fn(op->u.kernel.params, &op->u.kernel.config);
      }
      break;
    case TRT_OP_COPY:
      memmove(op->u.copy.dst, op->u.copy.src, op->u.copy.size);
      break;
    case TRT_OP_SET32:
      for (size_t i = 0; i < op->u.set.count; ++i) {
        op->u.set.dst[i] = op->u.set.value;
      }
      break;
    case TRT_OP_HOST_FN:
      trt_run_callback(op);
      break;
    case TRT_OP_WAIT:
      mtx_lock(&trt.mutex);
      while (!op->u.token->done) cnd_wait(&trt.cond, &trt.mutex);
      mtx_unlock(&trt.mutex);
      break;
    case TRT_OP_RECORD:
    case TRT_OP_FREE:
      break;
  }
}

static int trt_stream_main(void* arg) {
  hipStream_t stream = arg;
  prctl(PR_SET_NAME, (unsigned long)"trt-stream", 0ul, 0ul, 0ul);
  mtx_lock(&trt.mutex);
  for (;;) {
    while (!stream->head && !stream->exiting) {
      cnd_wait(&trt.cond, &trt.mutex);
    }
    if (!stream->head) break;
    trt_op_t* op = stream->head;
    mtx_unlock(&trt.mutex);
    trt_random_delay();
    trt_execute(op);
    mtx_lock(&trt.mutex);
    stream->head = op->next;
    if (!stream->head) stream->tail = NULL;
    stream->completed = op->seq;
    if (op->kind == TRT_OP_RECORD || op->kind == TRT_OP_FREE) {
      op->u.token->done = true;
      op->u.token->time_ns = trt_now_ns();
    }
    if (op->kind == TRT_OP_WAIT || op->kind == TRT_OP_RECORD ||
        op->kind == TRT_OP_FREE) {
      trt_token_release_locked(op->u.token);
    }
    cnd_broadcast(&trt.cond);
    if (op->kind == TRT_OP_KERNEL) free(op->u.kernel.kernarg);
    free(op);
  }
  mtx_unlock(&trt.mutex);
  return 0;
}

static trt_op_t* trt_op_new(trt_op_kind_t kind) {
  trt_op_t* op = calloc(1, sizeof(*op));
  if (!op) trt_die("out of host memory");
  op->kind = kind;
  return op;
}

// Under trt.mutex. A capturing stream adds the operation to its graph
// instead (the entries that enqueue anything else refuse to capture).
static void trt_enqueue_locked(hipStream_t stream, trt_op_t* op) {
  if (stream->capture) {
    struct hl_ihipGraph_t* graph = stream->capture;
    op->next = NULL;
    if (graph->tail) {
      graph->tail->next = op;
    } else {
      graph->head = op;
    }
    graph->tail = op;
    graph->node_count++;
    return;
  }
  op->seq = ++stream->enqueued;
  op->next = NULL;
  if (stream->tail) {
    stream->tail->next = op;
  } else {
    stream->head = op;
  }
  stream->tail = op;
  cnd_broadcast(&trt.cond);
}

static void trt_enqueue(hipStream_t stream, trt_op_t* op) {
  mtx_lock(&trt.mutex);
  trt_enqueue_locked(stream, op);
  mtx_unlock(&trt.mutex);
}

// Under trt.mutex: waits until |stream| has completed everything enqueued.
static void trt_stream_drain_locked(hipStream_t stream) {
  uint64_t target = stream->enqueued;
  while (stream->completed < target) cnd_wait(&trt.cond, &trt.mutex);
}

//===----------------------------------------------------------------------===//
// Initialization, errors, devices
//===----------------------------------------------------------------------===//

hipError_t hipInit(unsigned int flags) {
  TRT_COUNT(hipInit);
  trt_init();
  return flags == 0 ? hipSuccess : hipErrorInvalidValue;
}

const char* hipGetErrorName(hipError_t error) {
  TRT_COUNT(hipGetErrorName);
  switch (error) {
    case hipSuccess:
      return "hipSuccess";
    case hipErrorInvalidValue:
      return "hipErrorInvalidValue";
    case hipErrorOutOfMemory:
      return "hipErrorOutOfMemory";
    case hipErrorInvalidDevice:
      return "hipErrorInvalidDevice";
    case hipErrorInvalidImage:
      return "hipErrorInvalidImage";
    case hipErrorInvalidHandle:
      return "hipErrorInvalidHandle";
    case hipErrorNotFound:
      return "hipErrorNotFound";
    case hipErrorNotReady:
      return "hipErrorNotReady";
    case hipErrorNoBinaryForGpu:
      return "hipErrorNoBinaryForGpu";
    case hipErrorPeerAccessUnsupported:
      return "hipErrorPeerAccessUnsupported";
    case hipErrorIllegalAddress:
      return "hipErrorIllegalAddress";
    case hipErrorPeerAccessAlreadyEnabled:
      return "hipErrorPeerAccessAlreadyEnabled";
    default:
      return "hipErrorUnknown";
  }
}

hipError_t hipRuntimeGetVersion(int* version) {
  TRT_COUNT(hipRuntimeGetVersion);
  trt_init();
  if (!version) return hipErrorInvalidValue;
  *version = trt.version;
  return hipSuccess;
}

hipError_t hipGetDeviceCount(int* count) {
  TRT_COUNT(hipGetDeviceCount);
  trt_init();
  if (!count) return hipErrorInvalidValue;
  *count = trt.device_count;
  return hipSuccess;
}

static bool trt_device_valid(int device) {
  trt_init();
  return device >= 0 && device < trt.device_count;
}

hipError_t hipSetDevice(int device) {
  TRT_COUNT(hipSetDevice);
  if (!trt_device_valid(device)) return hipErrorInvalidDevice;
  trt_current_device = device;
  return hipSuccess;
}

hipError_t hipGetDevice(int* device) {
  TRT_COUNT(hipGetDevice);
  trt_init();
  if (!device) return hipErrorInvalidValue;
  *device = trt_current_device;
  return hipSuccess;
}

hipError_t hipDeviceGetName(char* name, int length, int device) {
  TRT_COUNT(hipDeviceGetName);
  if (!trt_device_valid(device)) return hipErrorInvalidDevice;
  if (!name || length <= 0) return hipErrorInvalidValue;
  snprintf(name, (size_t)length, "hipline test HIP device %d", device);
  return hipSuccess;
}

hipError_t hipDeviceTotalMem(size_t* bytes, int device) {
  TRT_COUNT(hipDeviceTotalMem);
  if (!trt_device_valid(device)) return hipErrorInvalidDevice;
  *bytes = (size_t)trt.memory_bytes;
  return hipSuccess;
}

hipError_t hipDeviceGetAttribute(int* value, int attribute, int device) {
  TRT_COUNT(hipDeviceGetAttribute);
  if (!trt_device_valid(device)) return hipErrorInvalidDevice;
  switch (attribute) {
    case HL_HIP_ATTR_MULTIPROCESSOR_COUNT:
      *value = 4;
      return hipSuccess;
    case HL_HIP_ATTR_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      return hipSuccess;
    case HL_HIP_ATTR_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      return hipSuccess;
    default:
      return hipErrorInvalidValue;
  }
}

// Fills the original layout at the offsets the backend declares.
hipError_t hipGetDeviceProperties(void* props, int device) {
  TRT_COUNT(hipGetDeviceProperties);
  if (!trt_device_valid(device)) return hipErrorInvalidDevice;
  hl_hip_device_prop_r0000_t* p = props;
  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "hipline test HIP device %d", device);
  p->total_global_mem = (size_t)trt.memory_bytes;
  p->multi_processor_count = 4;
  snprintf(p->gcn_arch_name, sizeof(p->gcn_arch_name), "%s",
           trt.targets[device]);
  return hipSuccess;
}

#if HL_TRT_ROCM_MAJOR >= 6
hipError_t hipGetDevicePropertiesR0000(void* props, int device) {
  TRT_COUNT(hipGetDevicePropertiesR0000);
  return hipGetDeviceProperties(props, device);
}
#endif

//===----------------------------------------------------------------------===//
// Pools (hip_mempool_impl.{hpp,cpp})
//===----------------------------------------------------------------------===//

// Under trt.mutex: the free block's reuse safety for |stream| (IsSafeFind).
static bool trt_is_safe_find(struct hl_ihipMemPool_t* pool, trt_block_t* block,
                             hipStream_t stream) {
  if (block->safe_stream == stream) return true;
  if (!block->marker) return true;
  return pool->reuse[hipMemPoolReuseAllowOpportunistic - 1] &&
         block->marker->done;
}

static bool trt_size_fits(size_t block_size, size_t size) {
#if HL_TRT_ROCM_MAJOR >= 6
  // Heap::FindMemory: "Runtime can accept an allocation with 12.5% on the
  // size threshold".
  return block_size >= size && (double)block_size <= (double)size / 8.0 * 9;
#else
  return block_size >= size;
#endif
}

// Under trt.mutex: frees the free block (returns it to the system).
static void trt_block_release_locked(trt_block_t* block) {
  struct hl_ihipMemPool_t* pool = block->pool;
  pool->free_bytes -= block->size;
  trt.device_reserved[pool->device] -= block->size;
  for (trt_block_t** link = &trt.blocks; *link; link = &(*link)->next) {
    if (*link == block) {
      *link = block->next;
      break;
    }
  }
  trt_token_release_locked(block->marker);
  free(block->ptr);
  free(block);
}

// Under trt.mutex: releases completed free blocks until the pool's free
// heap holds at most |keep| bytes (Heap::ReleaseAllMemory, IsSafeRelease).
static void trt_pool_release_locked(struct hl_ihipMemPool_t* pool,
                                    uint64_t keep) {
  trt_block_t* block = trt.blocks;
  while (block && pool->free_bytes > keep) {
    trt_block_t* next = block->next;
    if (block->pool == pool && !block->busy &&
        (!block->marker || block->marker->done)) {
      trt_block_release_locked(block);
    }
    block = next;
  }
}

// Under trt.mutex: what stream and device synchronization release
// (MemoryPool::ReleaseFreedMemory down to each pool's release threshold).
static void trt_device_release_locked(int device) {
  // Every pool of |device| with free blocks: the default pool and created
  // ones, found through their blocks.
  for (trt_block_t* block = trt.blocks; block;) {
    trt_block_t* next = block->next;
    struct hl_ihipMemPool_t* pool = block->pool;
    if (pool->device == device && !block->busy &&
        (!block->marker || block->marker->done) &&
        pool->free_bytes > pool->release_threshold) {
      trt_block_release_locked(block);
    }
    block = next;
  }
}

static trt_block_t* trt_block_find_locked(const void* ptr) {
  for (trt_block_t* block = trt.blocks; block; block = block->next) {
    if (block->ptr == ptr) return block;
  }
  return NULL;
}

// The busy or free block holding all of [ptr, ptr+size), or NULL.
static trt_block_t* trt_block_containing_locked(const void* ptr, size_t size) {
  const char* p = ptr;
  for (trt_block_t* block = trt.blocks; block; block = block->next) {
    if (p >= block->ptr && p + size <= block->ptr + block->size) return block;
  }
  return NULL;
}

// Whether [ptr, ptr+size) lies in device memory or pinned host memory.
static bool trt_is_async_memory_locked(const void* ptr, size_t size) {
  const char* p = ptr;
  for (trt_block_t* block = trt.blocks; block; block = block->next) {
    if (p >= block->ptr && p + size <= block->ptr + block->size) return true;
  }
  for (trt_range_t* range = trt.pinned; range; range = range->next) {
    if (p >= range->ptr && p + size <= range->ptr + range->size) return true;
  }
  return false;
}

// Whether device |device| reaches [ptr, ptr+size): anything but memory of
// another device's pool that has not granted it access (host memory is
// judged elsewhere). An access it does not reach faults on a GPU; here the
// call that would make it fails with hipErrorIllegalAddress.
static bool trt_device_reaches_locked(int device, const void* ptr,
                                      size_t size) {
  const char* p = ptr;
  for (trt_block_t* block = trt.blocks; block; block = block->next) {
    if (p + size <= block->ptr || p >= block->ptr + block->size) continue;
    if (block->pool->device != device &&
        !(block->pool->access & (1u << device))) {
      trt.counters.peer_faults++;
      return false;
    }
  }
  return true;
}

hipError_t hipMemPoolCreate(hipMemPool_t* pool, const hipMemPoolProps* props) {
  TRT_COUNT(hipMemPoolCreate);
  trt_init();
  if (!pool || !props ||
      props->alloc_type != HL_HIP_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != HL_HIP_MEM_LOCATION_TYPE_DEVICE ||
      !trt_device_valid(props->location.id)) {
    return hipErrorInvalidValue;
  }
  struct hl_ihipMemPool_t* p = calloc(1, sizeof(*p));
  if (!p) return hipErrorOutOfMemory;
  p->magic = TRT_POOL_MAGIC;
  p->device = props->location.id;
  for (int j = 0; j < 3; ++j) p->reuse[j] = 1;
  *pool = p;
  return hipSuccess;
}

hipError_t hipMemPoolDestroy(hipMemPool_t pool) {
  TRT_COUNT(hipMemPoolDestroy);
  if (!pool || pool->magic != TRT_POOL_MAGIC) return hipErrorInvalidValue;
  mtx_lock(&trt.mutex);
  if (pool->busy_bytes) {
    mtx_unlock(&trt.mutex);
    trt_die("hipMemPoolDestroy with %llu busy bytes",
            (unsigned long long)pool->busy_bytes);
  }
  // ~MemoryPool: ReleaseAllMemory with safe release (waits for markers).
  for (trt_block_t* block = trt.blocks; block;) {
    trt_block_t* next = block->next;
    if (block->pool == pool) {
      while (block->marker && !block->marker->done) {
        cnd_wait(&trt.cond, &trt.mutex);
      }
      trt_block_release_locked(block);
      next = trt.blocks;  // The list may have changed while waiting.
    }
    block = next;
  }
  pool->magic = 0;
  mtx_unlock(&trt.mutex);
  free(pool);
  return hipSuccess;
}

hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t* pool, int device) {
  TRT_COUNT(hipDeviceGetDefaultMemPool);
  if (!trt_device_valid(device)) return hipErrorInvalidDevice;
  *pool = &trt.default_pools[device];
  return hipSuccess;
}

hipError_t hipMallocFromPoolAsync(void** ptr, size_t size, hipMemPool_t pool,
                                  hipStream_t stream) {
  TRT_COUNT(hipMallocFromPoolAsync);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  trt_init();
  if (!ptr || !pool || pool->magic != TRT_POOL_MAGIC ||
      !trt_stream_valid(stream)) {
    return hipErrorInvalidValue;
  }
  *ptr = NULL;
  if (size == 0) return hipSuccess;
  mtx_lock(&trt.mutex);
  trt_block_t* found = NULL;
  for (trt_block_t* block = trt.blocks; block; block = block->next) {
    if (block->pool == pool && !block->busy &&
        trt_size_fits(block->size, size) &&
        trt_is_safe_find(pool, block, stream)) {
      found = block;
      break;
    }
  }
  if (found) {
    if (trt.blocking_reuse && found->marker && !found->marker->done) {
      // Heap::RemoveMemory(memory) without a timestamp: ts.Wait(). The
      // block leaves the free list first, so while this thread waits (the
      // mutex released) no other allocation takes it and no trim frees it.
      found->busy = true;
      while (!found->marker->done) cnd_wait(&trt.cond, &trt.mutex);
    }
    // Reuse before the free has executed is ordered only when the free and
    // the new allocation are on the same stream; otherwise work before the
    // free may still use the block while the new owner's work runs.
    if (found->marker && !found->marker->done && found->free_stream != stream) {
      trt.counters.unsafe_reuses++;
    }
    trt.counters.pool_reuses++;
    pool->free_bytes -= found->size;
    trt_token_release_locked(found->marker);
    found->marker = NULL;
  } else {
    if (trt.device_reserved[pool->device] + size > trt.memory_bytes) {
      // Out of device memory: completed free blocks go back first.
      trt_device_release_locked(pool->device);
      trt_pool_release_locked(pool, 0);
    }
    if (trt.device_reserved[pool->device] + size > trt.memory_bytes) {
      mtx_unlock(&trt.mutex);
      return hipErrorOutOfMemory;
    }
    found = calloc(1, sizeof(*found));
    char* memory = found ? malloc(size) : NULL;
    if (!memory) {
      free(found);
      mtx_unlock(&trt.mutex);
      return hipErrorOutOfMemory;
    }
    found->ptr = memory;
    found->size = size;
    found->pool = pool;
    found->next = trt.blocks;
    trt.blocks = found;
    trt.device_reserved[pool->device] += size;
  }
  found->busy = true;
  found->safe_stream = stream;
  pool->busy_bytes += found->size;
  if (pool->busy_bytes > pool->busy_high) pool->busy_high = pool->busy_bytes;
  if (pool->busy_bytes + pool->free_bytes > pool->reserved_high) {
    pool->reserved_high = pool->busy_bytes + pool->free_bytes;
  }
  *ptr = found->ptr;
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

hipError_t hipMallocAsync(void** ptr, size_t size, hipStream_t stream) {
  TRT_COUNT(hipMallocAsync);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (!trt_stream_valid(stream)) return hipErrorInvalidValue;
  return hipMallocFromPoolAsync(ptr, size, &trt.default_pools[stream->device],
                                stream);
}

hipError_t hipFreeAsync(void* ptr, hipStream_t stream) {
  TRT_COUNT(hipFreeAsync);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (!trt_stream_valid(stream)) return hipErrorInvalidValue;
  if (!ptr) return hipSuccess;
  mtx_lock(&trt.mutex);
  trt_block_t* block = trt_block_find_locked(ptr);
  if (!block || !block->busy) {
    mtx_unlock(&trt.mutex);
    return hipErrorInvalidValue;
  }
  struct hl_ihipMemPool_t* pool = block->pool;
  block->busy = false;
  pool->busy_bytes -= block->size;
  pool->free_bytes += block->size;
  // MemoryPool::FreeMemory: the allocating stream stays the only safe
  // stream; a marker on |stream| says when the free has executed.
  trt_op_t* op = trt_op_new(TRT_OP_FREE);
  op->u.token = trt_token_new();
  op->u.token->refs = 2;
  block->marker = op->u.token;
  block->free_stream = stream;
  trt_enqueue_locked(stream, op);
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

hipError_t hipMemPoolSetAttribute(hipMemPool_t pool, hipMemPoolAttr attr,
                                  void* value) {
  TRT_COUNT(hipMemPoolSetAttribute);
  if (!pool || pool->magic != TRT_POOL_MAGIC || !value) {
    return hipErrorInvalidValue;
  }
  hipError_t error = hipSuccess;
  mtx_lock(&trt.mutex);
  switch (attr) {
    case hipMemPoolAttrReleaseThreshold:
      pool->release_threshold = *(uint64_t*)value;
      break;
    case hipMemPoolReuseFollowEventDependencies:
    case hipMemPoolReuseAllowOpportunistic:
    case hipMemPoolReuseAllowInternalDependencies:
      pool->reuse[attr - 1] = *(int*)value;
      break;
    default:
      error = hipErrorInvalidValue;
  }
  mtx_unlock(&trt.mutex);
  return error;
}

hipError_t hipMemPoolGetAttribute(hipMemPool_t pool, hipMemPoolAttr attr,
                                  void* value) {
  TRT_COUNT(hipMemPoolGetAttribute);
  if (!pool || pool->magic != TRT_POOL_MAGIC || !value) {
    return hipErrorInvalidValue;
  }
  hipError_t error = hipSuccess;
  mtx_lock(&trt.mutex);
  switch (attr) {
    case hipMemPoolAttrReleaseThreshold:
      *(uint64_t*)value = pool->release_threshold;
      break;
    case hipMemPoolReuseFollowEventDependencies:
    case hipMemPoolReuseAllowOpportunistic:
    case hipMemPoolReuseAllowInternalDependencies:
      *(int*)value = pool->reuse[attr - 1];
      break;
    case hipMemPoolAttrReservedMemCurrent:
      *(uint64_t*)value = pool->busy_bytes + pool->free_bytes;
      break;
    case hipMemPoolAttrReservedMemHigh:
      *(uint64_t*)value = pool->reserved_high;
      break;
    case hipMemPoolAttrUsedMemCurrent:
      *(uint64_t*)value = pool->busy_bytes;
      break;
    case hipMemPoolAttrUsedMemHigh:
      *(uint64_t*)value = pool->busy_high;
      break;
    default:
      error = hipErrorInvalidValue;
  }
  mtx_unlock(&trt.mutex);
  return error;
}

hipError_t hipMemPoolTrimTo(hipMemPool_t pool, size_t min_bytes_to_hold) {
  TRT_COUNT(hipMemPoolTrimTo);
  if (!pool || pool->magic != TRT_POOL_MAGIC) return hipErrorInvalidValue;
  mtx_lock(&trt.mutex);
  trt_pool_release_locked(pool, min_bytes_to_hold);
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

//===----------------------------------------------------------------------===//
// Pinned host memory
//===----------------------------------------------------------------------===//

static hipError_t trt_pinned_add(void* ptr, size_t size, bool owned) {
  trt_range_t* range = calloc(1, sizeof(*range));
  if (!range) return hipErrorOutOfMemory;
  range->ptr = ptr;
  range->size = size;
  range->owned = owned;
  mtx_lock(&trt.mutex);
  range->next = trt.pinned;
  trt.pinned = range;
  if (owned) trt.counters.live_pinned++;
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

static hipError_t trt_pinned_remove(void* ptr, bool owned) {
  mtx_lock(&trt.mutex);
  for (trt_range_t** link = &trt.pinned; *link; link = &(*link)->next) {
    trt_range_t* range = *link;
    if (range->ptr == ptr && range->owned == owned) {
      *link = range->next;
      if (owned) trt.counters.live_pinned--;
      mtx_unlock(&trt.mutex);
      free(range);
      return hipSuccess;
    }
  }
  mtx_unlock(&trt.mutex);
  return hipErrorInvalidValue;
}

hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
  TRT_COUNT(hipHostMalloc);
  trt_init();
  (void)flags;
  if (!ptr) return hipErrorInvalidValue;
  *ptr = NULL;
  if (size == 0) return hipSuccess;
  void* memory = malloc(size);
  if (!memory) return hipErrorOutOfMemory;
  hipError_t error = trt_pinned_add(memory, size, true);
  if (error != hipSuccess) {
    free(memory);
    return error;
  }
  *ptr = memory;
  return hipSuccess;
}

hipError_t hipHostFree(void* ptr) {
  TRT_COUNT(hipHostFree);
  if (!ptr) return hipSuccess;
  hipError_t error = trt_pinned_remove(ptr, true);
  if (error == hipSuccess) free(ptr);
  return error;
}

hipError_t hipHostRegister(void* ptr, size_t size, unsigned int flags) {
  TRT_COUNT(hipHostRegister);
  trt_init();
  (void)flags;
  if (!ptr || size == 0) return hipErrorInvalidValue;
  return trt_pinned_add(ptr, size, false);
}

hipError_t hipHostUnregister(void* ptr) {
  TRT_COUNT(hipHostUnregister);
  return trt_pinned_remove(ptr, false);
}

//===----------------------------------------------------------------------===//
// Streams
//===----------------------------------------------------------------------===//

hipError_t hipStreamCreateWithFlags(hipStream_t* out, unsigned int flags) {
  TRT_COUNT(hipStreamCreateWithFlags);
  trt_init();
  if (!out || (flags & ~HL_HIP_STREAM_NON_BLOCKING)) {
    return hipErrorInvalidValue;
  }
  hipStream_t stream = calloc(1, sizeof(*stream));
  if (!stream) return hipErrorOutOfMemory;
  stream->magic = TRT_STREAM_MAGIC;
  stream->device = trt_current_device;
  mtx_lock(&trt.mutex);
  // A stream holds its hardware queue and resources until hipStreamDestroy
  // returns; past the limit creation fails as ROCm's does when they run out.
  if (trt.stream_count >= trt.max_streams) {
    mtx_unlock(&trt.mutex);
    free(stream);
    return hipErrorOutOfMemory;
  }
  trt.streams[trt.stream_count++] = stream;
  trt.counters.live_streams++;
  mtx_unlock(&trt.mutex);
  if (thrd_create(&stream->worker, trt_stream_main, stream) != thrd_success) {
    trt_die("cannot start a stream worker");
  }
  *out = stream;
  return hipSuccess;
}

hipError_t hipStreamDestroy(hipStream_t stream) {
  TRT_COUNT(hipStreamDestroy);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (!trt_stream_valid(stream)) return hipErrorInvalidHandle;
  mtx_lock(&trt.mutex);
  trt_stream_drain_locked(stream);
  stream->exiting = true;
  cnd_broadcast(&trt.cond);
  for (int i = 0; i < trt.stream_count; ++i) {
    if (trt.streams[i] == stream) {
      trt.streams[i] = trt.streams[--trt.stream_count];
      break;
    }
  }
  // MemoryPool::RemoveStream: the stream leaves every safe list.
  for (trt_block_t* block = trt.blocks; block; block = block->next) {
    if (block->safe_stream == stream) block->safe_stream = NULL;
  }
  trt.counters.live_streams--;
  mtx_unlock(&trt.mutex);
  thrd_join(stream->worker, NULL);
  stream->magic = 0;
  free(stream);
  return hipSuccess;
}

hipError_t hipStreamSynchronize(hipStream_t stream) {
  TRT_COUNT(hipStreamSynchronize);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (!trt_stream_valid(stream)) return hipErrorInvalidHandle;
  mtx_lock(&trt.mutex);
  trt_stream_drain_locked(stream);
  trt_device_release_locked(stream->device);
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

// hipSuccess once everything enqueued on |stream| has completed.
hipError_t hipStreamQuery(hipStream_t stream) {
  TRT_COUNT(hipStreamQuery);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (!trt_stream_valid(stream)) return hipErrorInvalidHandle;
  mtx_lock(&trt.mutex);
  bool idle = stream->completed >= stream->enqueued;
  mtx_unlock(&trt.mutex);
  return idle ? hipSuccess : hipErrorNotReady;
}

hipError_t hipDeviceSynchronize(void) {
  TRT_COUNT(hipDeviceSynchronize);
  trt_init();
  int device = trt_current_device;
  mtx_lock(&trt.mutex);
  for (int i = 0; i < trt.stream_count; ++i) {
    if (trt.streams[i]->device == device) {
      trt_stream_drain_locked(trt.streams[i]);
    }
  }
  trt_device_release_locked(device);
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event,
                              unsigned int flags) {
  TRT_COUNT(hipStreamWaitEvent);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (!trt_stream_valid(stream) || !trt_event_valid(event) || flags) {
    return hipErrorInvalidValue;
  }
  mtx_lock(&trt.mutex);
  if (event->device != stream->device) trt.counters.cross_device_waits++;
  if (event->token && !event->token->done) {
    // Waits for the record as of now; a later record makes a new token.
    trt_op_t* op = trt_op_new(TRT_OP_WAIT);
    op->u.token = event->token;
    event->token->refs++;
    trt_enqueue_locked(stream, op);
  }
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

static hipError_t trt_add_host_op(hipStream_t stream, hipHostFn_t fn,
                                  hipStreamCallback_t callback, void* user) {
  if (!trt_stream_valid(stream) || (!fn && !callback)) {
    return hipErrorInvalidValue;
  }
  trt_op_t* op = trt_op_new(TRT_OP_HOST_FN);
  op->u.host.fn = fn;
  op->u.host.callback = callback;
  op->u.host.stream = stream;
  op->u.host.user = user;
  trt_enqueue(stream, op);
  return hipSuccess;
}

#if HL_TRT_ROCM_MAJOR > 5 || (HL_TRT_ROCM_MAJOR == 5 && HL_TRT_ROCM_MINOR >= 4)
hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn,
                             void* user_data) {
  TRT_COUNT(hipLaunchHostFunc);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (!fn) return hipErrorInvalidValue;
  return trt_add_host_op(stream, fn, NULL, user_data);
}
#endif

hipError_t hipStreamAddCallback(hipStream_t stream,
                                hipStreamCallback_t callback, void* user_data,
                                unsigned int flags) {
  TRT_COUNT(hipStreamAddCallback);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (flags || !callback) return hipErrorInvalidValue;
  return trt_add_host_op(stream, NULL, callback, user_data);
}

//===----------------------------------------------------------------------===//
// Events
//===----------------------------------------------------------------------===//

hipError_t hipEventCreateWithFlags(hipEvent_t* out, unsigned int flags) {
  TRT_COUNT(hipEventCreateWithFlags);
  trt_init();
  if (!out ||
      (flags & ~(HL_HIP_EVENT_BLOCKING_SYNC | HL_HIP_EVENT_DISABLE_TIMING))) {
    return hipErrorInvalidValue;
  }
  hipEvent_t event = calloc(1, sizeof(*event));
  if (!event) return hipErrorOutOfMemory;
  event->magic = TRT_EVENT_MAGIC;
  event->device = trt_current_device;
  event->flags = flags;
  mtx_lock(&trt.mutex);
  trt.counters.events_created++;
  trt.counters.live_events++;
  if (!(flags & HL_HIP_EVENT_DISABLE_TIMING)) {
    trt.counters.timed_events_created++;
  }
  mtx_unlock(&trt.mutex);
  *out = event;
  return hipSuccess;
}

hipError_t hipEventDestroy(hipEvent_t event) {
  TRT_COUNT(hipEventDestroy);
  if (!trt_event_valid(event)) return hipErrorInvalidHandle;
  mtx_lock(&trt.mutex);
  trt_token_release_locked(event->token);
  trt.counters.live_events--;
  mtx_unlock(&trt.mutex);
  event->magic = 0;
  free(event);
  return hipSuccess;
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  TRT_COUNT(hipEventRecord);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (!trt_event_valid(event)) return hipErrorInvalidHandle;
  if (!trt_stream_valid(stream)) return hipErrorInvalidValue;
  // hip_event.cpp: an event records only on a stream of its own device.
  if (stream->device != event->device) return hipErrorInvalidHandle;
  trt_op_t* op = trt_op_new(TRT_OP_RECORD);
  trt_token_t* token = trt_token_new();
  token->refs = 2;  // The event's and the operation's.
  op->u.token = token;
  mtx_lock(&trt.mutex);
  trt_token_release_locked(event->token);
  event->token = token;
  trt_enqueue_locked(stream, op);
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

hipError_t hipEventQuery(hipEvent_t event) {
  TRT_COUNT(hipEventQuery);
  if (!trt_event_valid(event)) return hipErrorInvalidHandle;
  mtx_lock(&trt.mutex);
  bool done = !event->token || event->token->done;
  mtx_unlock(&trt.mutex);
  return done ? hipSuccess : hipErrorNotReady;
}

hipError_t hipEventSynchronize(hipEvent_t event) {
  TRT_COUNT(hipEventSynchronize);
  if (!trt_event_valid(event)) return hipErrorInvalidHandle;
  mtx_lock(&trt.mutex);
  trt.counters.event_synchronizes++;
  while (event->token && !event->token->done) {
    cnd_wait(&trt.cond, &trt.mutex);
  }
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
  TRT_COUNT(hipEventElapsedTime);
  if (!ms) return hipErrorInvalidValue;
  if (!trt_event_valid(start) || !trt_event_valid(stop)) {
    return hipErrorInvalidHandle;
  }
  if ((start->flags | stop->flags) & HL_HIP_EVENT_DISABLE_TIMING) {
    return hipErrorInvalidHandle;
  }
  mtx_lock(&trt.mutex);
  hipError_t error = hipSuccess;
  if (!start->token || !stop->token) {
    error = hipErrorInvalidHandle;
  } else if (!start->token->done || !stop->token->done) {
    error = hipErrorNotReady;
  } else {
    *ms = (float)((double)(stop->token->time_ns - start->token->time_ns) / 1e6);
  }
  mtx_unlock(&trt.mutex);
  return error;
}

//===----------------------------------------------------------------------===//
// Copies and fills
//===----------------------------------------------------------------------===//

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t size, int kind,
                          hipStream_t stream) {
  TRT_COUNT(hipMemcpyAsync);
  if (kind != HL_HIP_MEMCPY_DEFAULT || !trt_stream_valid(stream)) {
    return hipErrorInvalidValue;
  }
  if (size == 0) return hipSuccess;
  if (!dst || !src) return hipErrorInvalidValue;
  trt_op_t* op = trt_op_new(TRT_OP_COPY);
  op->u.copy.dst = dst;
  op->u.copy.src = src;
  op->u.copy.size = size;
  mtx_lock(&trt.mutex);
  if (!trt_device_reaches_locked(stream->device, dst, size) ||
      !trt_device_reaches_locked(stream->device, src, size)) {
    mtx_unlock(&trt.mutex);
    free(op);
    return hipErrorIllegalAddress;
  }
  bool async = trt_is_async_memory_locked(dst, size) &&
               trt_is_async_memory_locked(src, size);
  if (async) {
    trt.counters.async_copies++;
    trt_enqueue_locked(stream, op);
    mtx_unlock(&trt.mutex);
    return hipSuccess;
  }
  if (stream->capture) {
    // A copy that waits for itself cannot be captured.
    mtx_unlock(&trt.mutex);
    free(op);
    return hipErrorStreamCaptureUnsupported;
  }
  // Pageable host memory: ihipMemcpy's isHostAsync = false path waits for
  // the copy (and so for everything before it on the stream).
  trt.counters.blocking_copies++;
  trt_enqueue_locked(stream, op);
  uint64_t seq = op->seq;
  while (stream->completed < seq) cnd_wait(&trt.cond, &trt.mutex);
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

hipError_t hipMemsetD32Async(hipDeviceptr_t dst, int value, size_t count,
                             hipStream_t stream) {
  TRT_COUNT(hipMemsetD32Async);
  if (!trt_stream_valid(stream) || !dst) return hipErrorInvalidValue;
  if (count == 0) return hipSuccess;
  mtx_lock(&trt.mutex);
  bool reachable = trt_is_async_memory_locked(dst, count * 4);
  bool peer_ok = trt_device_reaches_locked(stream->device, dst, count * 4);
  mtx_unlock(&trt.mutex);
  if (!reachable) return hipErrorInvalidValue;  // Pageable host memory.
  if (!peer_ok) return hipErrorIllegalAddress;
  trt_op_t* op = trt_op_new(TRT_OP_SET32);
  op->u.set.dst = dst;
  memcpy(&op->u.set.value, &value, sizeof(value));
  op->u.set.count = count;
  trt_enqueue(stream, op);
  return hipSuccess;
}

//===----------------------------------------------------------------------===//
// Peers
//===----------------------------------------------------------------------===//
// As CUDA and ROCm: hipDeviceCanAccessPeer reports the machine's matrix;
// hipDeviceEnablePeerAccess (from the current device) covers plain device
// memory only, and memory of a stream-ordered pool is reachable from
// another device only once the pool grants it (hipMemPoolSetAccess, which
// needs the pair to be peer-capable). A copy, fill or kernel whose stream's
// device does not reach its memory fails with hipErrorIllegalAddress (a GPU
// would fault). hipMemcpyPeerAsync is held to the same rule: stricter than
// HIP, which may stage a peer copy itself, so that hipline never relies on
// that.

hipError_t hipDeviceCanAccessPeer(int* can_access, int device,
                                  int peer_device) {
  TRT_COUNT(hipDeviceCanAccessPeer);
  trt_init();
  if (!can_access) return hipErrorInvalidValue;
  if (!trt_device_valid(device) || !trt_device_valid(peer_device)) {
    return hipErrorInvalidDevice;
  }
  *can_access = device != peer_device &&
                (trt.peer_capable[device] & (1u << peer_device)) != 0;
  return hipSuccess;
}

hipError_t hipDeviceEnablePeerAccess(int peer_device, unsigned int flags) {
  TRT_COUNT(hipDeviceEnablePeerAccess);
  trt_init();
  int device = trt_current_device;
  if (flags) return hipErrorInvalidValue;
  if (!trt_device_valid(peer_device) || peer_device == device) {
    return hipErrorInvalidDevice;
  }
  mtx_lock(&trt.mutex);
  hipError_t error = hipSuccess;
  if (!(trt.peer_capable[device] & (1u << peer_device))) {
    error = hipErrorPeerAccessUnsupported;
  } else if (trt.peer_enabled[device] & (1u << peer_device)) {
    error = hipErrorPeerAccessAlreadyEnabled;
  } else {
    trt.peer_enabled[device] |= 1u << peer_device;
  }
  mtx_unlock(&trt.mutex);
  return error;
}

hipError_t hipMemPoolSetAccess(hipMemPool_t pool, const hipMemAccessDesc* descs,
                               size_t count) {
  TRT_COUNT(hipMemPoolSetAccess);
  trt_init();
  if (!pool || pool->magic != TRT_POOL_MAGIC || (count && !descs)) {
    return hipErrorInvalidValue;
  }
  mtx_lock(&trt.mutex);
  hipError_t error = hipSuccess;
  for (size_t i = 0; i < count && error == hipSuccess; ++i) {
    int device = descs[i].location.id;
    if (descs[i].location.type != HL_HIP_MEM_LOCATION_TYPE_DEVICE ||
        !trt_device_valid(device) ||
        (descs[i].flags != 0 && descs[i].flags != 1 && descs[i].flags != 3)) {
      error = hipErrorInvalidValue;
    } else if (device == pool->device) {
      // The owner always has access; it cannot be taken away.
      if (descs[i].flags != 3) error = hipErrorInvalidDevice;
    } else if (!(trt.peer_capable[device] & (1u << pool->device))) {
      error = hipErrorInvalidDevice;
    } else if (descs[i].flags) {
      pool->access |= 1u << device;
    } else {
      pool->access &= ~(1u << device);
    }
  }
  mtx_unlock(&trt.mutex);
  return error;
}

hipError_t hipMemcpyPeerAsync(void* dst, int dst_device, const void* src,
                              int src_device, size_t size, hipStream_t stream) {
  TRT_COUNT(hipMemcpyPeerAsync);
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  if (!trt_stream_valid(stream) || !trt_device_valid(dst_device) ||
      !trt_device_valid(src_device)) {
    return hipErrorInvalidValue;
  }
  if (size == 0) return hipSuccess;
  if (!dst || !src) return hipErrorInvalidValue;
  mtx_lock(&trt.mutex);
  trt_block_t* d = trt_block_containing_locked(dst, size);
  trt_block_t* s = trt_block_containing_locked(src, size);
  if (!d || !s || d->pool->device != dst_device ||
      s->pool->device != src_device) {
    mtx_unlock(&trt.mutex);
    return hipErrorInvalidValue;  // Not device memory of those devices.
  }
  if (!trt_device_reaches_locked(stream->device, dst, size) ||
      !trt_device_reaches_locked(stream->device, src, size)) {
    mtx_unlock(&trt.mutex);
    return hipErrorIllegalAddress;
  }
  trt.counters.peer_copies++;
  trt_op_t* op = trt_op_new(TRT_OP_COPY);
  op->u.copy.dst = dst;
  op->u.copy.src = src;
  op->u.copy.size = size;
  trt_enqueue_locked(stream, op);
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

//===----------------------------------------------------------------------===//
// Modules and kernels
//===----------------------------------------------------------------------===//

// The image's size: an ELF's from its section header table, an offload
// bundle's from its last entry. 0 when the image is neither.
static size_t trt_image_size(const unsigned char* image) {
  static const char kBundle[] = "__CLANG_OFFLOAD_BUNDLE__";
  if (memcmp(image,
             "\x7f"
             "ELF",
             4) == 0) {
    uint16_t machine, shentsize, shnum;
    uint64_t shoff;
    memcpy(&machine, image + 18, 2);
    if (image[4] != 2 || machine != 224) return 0;  // ELF64, EM_AMDGPU.
    memcpy(&shoff, image + 40, 8);
    memcpy(&shentsize, image + 58, 2);
    memcpy(&shnum, image + 60, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
  }
  if (memcmp(image, kBundle, sizeof(kBundle) - 1) == 0) {
    uint64_t count, end = 0;
    const unsigned char* p = image + sizeof(kBundle) - 1;
    memcpy(&count, p, 8);
    p += 8;
    for (uint64_t i = 0; i < count && i < 64; ++i) {
      uint64_t offset, size, triple;
      memcpy(&offset, p, 8);
      memcpy(&size, p + 8, 8);
      memcpy(&triple, p + 16, 8);
      p += 24 + triple;
      if (offset + size > end) end = offset + size;
    }
    return (size_t)end;
  }
  return 0;
}

// The processor of an AMDGPU ELF (EF_AMDGPU_MACH, e_flags & 0xff) for the
// targets hipline builds and tests; NULL for others (not judged).
static const char* trt_elf_processor(const unsigned char* image) {
  static const struct {
    uint32_t mach;
    const char* name;
  } kMachs[] = {{0x2a, "gfx803"}, {0x30, "gfx908"},  {0x3f, "gfx90a"},
                {0x4c, "gfx942"}, {0x36, "gfx1030"}, {0x41, "gfx1100"},
                {0x4e, "gfx1201"}};
  uint32_t flags;
  memcpy(&flags, image + 48, 4);
  for (size_t i = 0; i < sizeof(kMachs) / sizeof(*kMachs); ++i) {
    if (kMachs[i].mach == (flags & 0xffu)) return kMachs[i].name;
  }
  return NULL;
}

// Whether |image| (|size| bytes) holds code for |device|'s processor (its
// target id up to the first ':'): an ELF of that processor, or a bundle
// with an amdgcn entry for it. As ROCm, which fails hipModuleLoadData with
// hipErrorNoBinaryForGpu otherwise, so that a device loading another
// device's object fails here too.
static bool trt_image_for_device(const unsigned char* image, size_t size,
                                 int device) {
  char processor[64];
  snprintf(processor, sizeof(processor), "%s", trt.targets[device]);
  processor[strcspn(processor, ":")] = '\0';
  if (image[0] == 0x7f) {
    const char* mach = trt_elf_processor(image);
    return !mach || strcmp(mach, processor) == 0;
  }
  char entry[80];
  int n = snprintf(entry, sizeof(entry), "amdhsa--%s", processor);
  for (const unsigned char* p = image;
       (p = memmem(p, size - (size_t)(p - image), entry, (size_t)n)) != NULL;
       p += n) {
    unsigned char next = p[n];
    if (next == ':' || next < ' ') return true;  // Not gfx90 of gfx90a.
  }
  return false;
}

hipError_t hipModuleLoadData(hipModule_t* out, const void* image) {
  TRT_COUNT(hipModuleLoadData);
  trt_init();
  if (!out || !image) return hipErrorInvalidValue;
  size_t size = trt_image_size(image);
  if (size == 0) return hipErrorInvalidImage;
  if (!trt_device_valid(trt_current_device) ||
      !trt_image_for_device(image, size, trt_current_device)) {
    return hipErrorNoBinaryForGpu;
  }
  struct hl_ihipModule_t* module = calloc(1, sizeof(*module));
  if (!module) return hipErrorOutOfMemory;
  module->magic = TRT_MODULE_MAGIC;
  module->device = trt_current_device;
  const hl_host_code_object_t* code = &hl_host_kernels_code_object;
  for (uint32_t i = 0; i < code->kernel_count && i < HL_KERNEL_COUNT; ++i) {
    const char* name = code->kernels[i].name;
    module->has[i] = memmem(image, size, name, strlen(name) + 1) != NULL;
  }
  module->image = malloc(size);
  if (!module->image) {
    free(module);
    return hipErrorOutOfMemory;
  }
  memcpy(module->image, image, size);
  module->image_size = size;
  *out = module;
  return hipSuccess;
}

hipError_t hipModuleUnload(hipModule_t module) {
  TRT_COUNT(hipModuleUnload);
  if (!module || module->magic != TRT_MODULE_MAGIC) {
    return hipErrorInvalidHandle;
  }
  module->magic = 0;
  for (int i = 0; i < HL_KERNEL_COUNT; ++i) {
    if (module->functions[i]) module->functions[i]->magic = 0;
    free(module->functions[i]);
  }
  while (module->twins) {
    hipFunction_t next = module->twins->next_twin;
    module->twins->magic = 0;
    free(module->twins);
    module->twins = next;
  }
  free(module->image);
  free(module);
  return hipSuccess;
}

// A user kernel of |module|: its host twin, when the image has the name.
static hipError_t trt_module_get_twin(hipFunction_t* out, hipModule_t module,
                                      const char* name) {
  const hl_host_kernel_info_t* twin = trt_twin_lookup(name);
  if (!twin ||
      !memmem(module->image, module->image_size, name, strlen(name) + 1)) {
    return hipErrorNotFound;
  }
  // A second lookup returns the same handle.
  for (hipFunction_t f = module->twins; f; f = f->next_twin) {
    if (f->twin == twin) {
      *out = f;
      return hipSuccess;
    }
  }
  hipFunction_t function = calloc(1, sizeof(*function));
  if (!function) return hipErrorOutOfMemory;
  function->magic = TRT_FUNCTION_MAGIC;
  function->module = module;
  function->twin = twin;
  function->next_twin = module->twins;
  module->twins = function;
  *out = function;
  return hipSuccess;
}

hipError_t hipModuleGetFunction(hipFunction_t* out, hipModule_t module,
                                const char* name) {
  TRT_COUNT(hipModuleGetFunction);
  if (!module || module->magic != TRT_MODULE_MAGIC) {
    return hipErrorInvalidHandle;
  }
  if (module->device != trt_current_device) {
    trt_die(
        "hipModuleGetFunction(\"%s\") on device %d for a module loaded on "
        "device %d: ROCm aborts here (hip_code_object.hpp, "
        "CheckDeviceIdMatch: \"Device mismatch from where this module is "
        "loaded\")",
        name ? name : "(null)", trt_current_device, module->device);
  }
  if (!out || !name) return hipErrorInvalidValue;
  const hl_host_code_object_t* code = &hl_host_kernels_code_object;
  for (uint32_t i = 0; i < code->kernel_count && i < HL_KERNEL_COUNT; ++i) {
    if (module->has[i] && strcmp(code->kernels[i].name, name) == 0) {
      // The module owns its functions (ROCm frees them with the module);
      // a second lookup returns the same handle.
      if (!module->functions[i]) {
        hipFunction_t function = calloc(1, sizeof(*function));
        if (!function) return hipErrorOutOfMemory;
        function->magic = TRT_FUNCTION_MAGIC;
        function->module = module;
        function->kernel = &code->kernels[i];
        module->functions[i] = function;
      }
      *out = module->functions[i];
      return hipSuccess;
    }
  }
  return trt_module_get_twin(out, module, name);
}

// hipModuleLaunchKernel of a user kernel: the twin's kernarg segment is laid
// out now (arguments are copied at launch) and the twin runs in stream order.
static hipError_t trt_launch_twin(hipFunction_t function, unsigned grid_x,
                                  unsigned grid_y, unsigned grid_z,
                                  unsigned block_x, unsigned block_y,
                                  unsigned block_z, unsigned shared_bytes,
                                  hipStream_t stream, void** kernel_params,
                                  void** extra) {
  const hl_host_kernel_info_t* twin = function->twin;
  if (!trt_stream_valid(stream) || extra ||
      (!kernel_params && twin->arg_count)) {
    return hipErrorInvalidValue;
  }
  if (stream->device != function->module->device) {
    return hipErrorInvalidDevice;
  }
  if (!grid_x || !grid_y || !grid_z || !block_x || !block_y || !block_z ||
      (uint64_t)block_x * block_y * block_z > 1024) {
    return hipErrorInvalidValue;
  }
  uint32_t grid[3] = {grid_x, grid_y, grid_z};
  uint32_t block[3] = {block_x, block_y, block_z};
  unsigned char* kernarg =
      trt_twin_kernarg(twin, kernel_params, grid, block, shared_bytes);
  if (!kernarg) return hipErrorOutOfMemory;
  trt_op_t* op = trt_op_new(TRT_OP_KERNEL);
  op->u.kernel.twin = twin;
  op->u.kernel.kernarg = kernarg;
  op->u.kernel.config.grid = (hl_dim3_t){grid_x, grid_y, grid_z};
  op->u.kernel.config.block = (hl_dim3_t){block_x, block_y, block_z};
  op->u.kernel.config.shared_bytes = shared_bytes;
  trt_enqueue(stream, op);
  return hipSuccess;
}

// Whether every pointer-sized argument of a built-in kernel that points
// into a pool block is memory |device| reaches (the kernels' buffers).
static bool trt_kernel_reaches(int device, const hl_host_kernel_t* kernel,
                               void** kernel_params) {
  mtx_lock(&trt.mutex);
  bool ok = true;
  for (uint32_t i = 0; i < kernel->param_count && i < 16 && ok; ++i) {
    if (kernel->param_sizes[i] != sizeof(void*)) continue;
    void* pointer = NULL;
    memcpy(&pointer, kernel_params[i], sizeof(pointer));
    ok = trt_device_reaches_locked(device, pointer, 1);
  }
  mtx_unlock(&trt.mutex);
  return ok;
}

hipError_t hipModuleLaunchKernel(hipFunction_t function, unsigned int grid_x,
                                 unsigned int grid_y, unsigned int grid_z,
                                 unsigned int block_x, unsigned int block_y,
                                 unsigned int block_z,
                                 unsigned int shared_bytes, hipStream_t stream,
                                 void** kernel_params, void** extra) {
  TRT_COUNT(hipModuleLaunchKernel);
  if (!function || function->magic != TRT_FUNCTION_MAGIC) {
    return hipErrorInvalidHandle;
  }
  if (function->twin) {
    return trt_launch_twin(function, grid_x, grid_y, grid_z, block_x, block_y,
                           block_z, shared_bytes, stream, kernel_params, extra);
  }
  if (!trt_stream_valid(stream) || extra ||
      (!kernel_params && function->kernel->param_count)) {
    return hipErrorInvalidValue;
  }
  if (stream->device != function->module->device) {
    return hipErrorInvalidDevice;
  }
  if (!grid_x || !grid_y || !grid_z || !block_x || !block_y || !block_z ||
      (uint64_t)block_x * block_y * block_z > 1024) {
    return hipErrorInvalidValue;
  }
  const hl_host_kernel_t* kernel = function->kernel;
  trt_op_t* op = trt_op_new(TRT_OP_KERNEL);
  op->u.kernel.kernel = kernel;
  op->u.kernel.config.grid = (hl_dim3_t){grid_x, grid_y, grid_z};
  op->u.kernel.config.block = (hl_dim3_t){block_x, block_y, block_z};
  op->u.kernel.config.shared_bytes = shared_bytes;
  op->u.kernel.config.launch_ns = trt_now_ns();  // For spin's device time.
  // Arguments are copied at launch, as the packet's kernarg segment is.
  size_t offset = 0;
  for (uint32_t i = 0; i < kernel->param_count && i < 16; ++i) {
    uint32_t size = kernel->param_sizes[i];
    if (offset + size > sizeof(op->u.kernel.storage)) {
      free(op);
      return hipErrorInvalidValue;
    }
    memcpy(op->u.kernel.storage + offset, kernel_params[i], size);
    op->u.kernel.params[i] = op->u.kernel.storage + offset;
    offset += (size + 15u) & ~(size_t)15u;
  }
  if (!trt_kernel_reaches(stream->device, kernel, kernel_params)) {
    free(op);
    return hipErrorIllegalAddress;
  }
  trt_enqueue(stream, op);
  return hipSuccess;
}

//===----------------------------------------------------------------------===//
// Test hooks
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Graphs (stream capture)
//===----------------------------------------------------------------------===//

hipError_t hipStreamBeginCapture(hipStream_t stream,
                                 hipStreamCaptureMode mode) {
  TRT_COUNT(hipStreamBeginCapture);
  if (!trt_stream_valid(stream) || mode < 0 || mode > 2) {
    return hipErrorInvalidValue;
  }
  struct hl_ihipGraph_t* graph = calloc(1, sizeof(*graph));
  if (!graph) trt_die("out of host memory");
  graph->magic = TRT_GRAPH_MAGIC;
  graph->device = stream->device;
  mtx_lock(&trt.mutex);
  if (stream->capture) {
    mtx_unlock(&trt.mutex);
    free(graph);
    return hipErrorStreamCaptureUnsupported;  // Already capturing.
  }
  stream->capture = graph;
  trt.counters.live_graphs++;
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t* out) {
  TRT_COUNT(hipStreamEndCapture);
  if (!trt_stream_valid(stream) || !out) return hipErrorInvalidValue;
  mtx_lock(&trt.mutex);
  struct hl_ihipGraph_t* graph = stream->capture;
  stream->capture = NULL;
  mtx_unlock(&trt.mutex);
  if (!graph) return hipErrorStreamCaptureInvalidated;  // Not capturing.
  *out = graph;
  return hipSuccess;
}

static void trt_op_list_free(trt_op_t* op) {
  while (op) {
    trt_op_t* next = op->next;
    if (op->kind == TRT_OP_KERNEL) free(op->u.kernel.kernarg);
    free(op);
    op = next;
  }
}

// A copy of |op| whose kernel parameters point into the copy's storage.
static trt_op_t* trt_op_clone(const trt_op_t* op) {
  trt_op_t* clone = trt_op_new(op->kind);
  memcpy(clone, op, sizeof(*clone));
  clone->next = NULL;
  if (op->kind == TRT_OP_KERNEL) {
    for (size_t i = 0; i < 16; ++i) {
      if (!op->u.kernel.params[i]) continue;
      clone->u.kernel.params[i] =
          clone->u.kernel.storage +
          ((const unsigned char*)op->u.kernel.params[i] - op->u.kernel.storage);
    }
    // A twin's kernarg segment is owned by its op: each node of a graph,
    // and each launch of it, runs with its own copy (as HIP copies the
    // arguments into the graph's kernel node).
    if (op->u.kernel.kernarg) {
      size_t size = op->u.kernel.twin->kernarg_size;
      clone->u.kernel.kernarg = malloc(size ? size : 1);
      if (!clone->u.kernel.kernarg) trt_die("out of host memory");
      memcpy(clone->u.kernel.kernarg, op->u.kernel.kernarg, size);
    }
  }
  return clone;
}

hipError_t hipGraphInstantiate(hipGraphExec_t* out, hipGraph_t graph,
                               void* error_node, char* log_buffer,
                               size_t log_size) {
  TRT_COUNT(hipGraphInstantiate);
  (void)error_node;
  (void)log_buffer;
  (void)log_size;
  if (!out || !graph || graph->magic != TRT_GRAPH_MAGIC) {
    return hipErrorInvalidValue;
  }
  struct hl_ihipGraphExec_t* exec = calloc(1, sizeof(*exec));
  if (!exec) trt_die("out of host memory");
  exec->magic = TRT_GRAPH_EXEC_MAGIC;
  exec->device = graph->device;
  trt_op_t** tail = &exec->head;
  for (const trt_op_t* op = graph->head; op; op = op->next) {
    *tail = trt_op_clone(op);
    tail = &(*tail)->next;
    exec->node_count++;
  }
  mtx_lock(&trt.mutex);
  trt.counters.live_graphs++;
  mtx_unlock(&trt.mutex);
  *out = exec;
  return hipSuccess;
}

// Enqueues a copy of every node, in dependency order (the chain's), as one
// operation of the caller's: nothing else of the caller's comes between.
hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream) {
  TRT_COUNT(hipGraphLaunch);
  if (!exec || exec->magic != TRT_GRAPH_EXEC_MAGIC ||
      !trt_stream_valid(stream)) {
    return hipErrorInvalidValue;
  }
  if (exec->device != stream->device) return hipErrorInvalidDevice;
  if (trt_capturing(stream)) return hipErrorStreamCaptureUnsupported;
  trt_op_t* head = NULL;
  trt_op_t** tail = &head;
  for (const trt_op_t* op = exec->head; op; op = op->next) {
    *tail = trt_op_clone(op);
    tail = &(*tail)->next;
  }
  mtx_lock(&trt.mutex);
  while (head) {
    trt_op_t* op = head;
    head = op->next;
    trt_enqueue_locked(stream, op);
  }
  trt.counters.graph_launches++;
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

hipError_t hipGraphExecDestroy(hipGraphExec_t exec) {
  TRT_COUNT(hipGraphExecDestroy);
  if (!exec || exec->magic != TRT_GRAPH_EXEC_MAGIC) return hipErrorInvalidValue;
  exec->magic = 0;
  trt_op_list_free(exec->head);
  free(exec);
  mtx_lock(&trt.mutex);
  trt.counters.live_graphs--;
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

hipError_t hipGraphDestroy(hipGraph_t graph) {
  TRT_COUNT(hipGraphDestroy);
  if (!graph || graph->magic != TRT_GRAPH_MAGIC) return hipErrorInvalidValue;
  graph->magic = 0;
  trt_op_list_free(graph->head);
  free(graph);
  mtx_lock(&trt.mutex);
  trt.counters.live_graphs--;
  mtx_unlock(&trt.mutex);
  return hipSuccess;
}

void hlTestRuntimeGetCounters(hl_trt_counters_t* out) {
  trt_init();
  mtx_lock(&trt.mutex);
  *out = trt.counters;
  mtx_unlock(&trt.mutex);
}
