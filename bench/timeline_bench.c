// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// hipline-bench-timeline: timeline costs on the host backend (or, with
// --backend hip, the hip backend: a GPU or the hip test runtime).
//
//   submit     Host-side cost of an empty submission on one queue: one wait
//              on an already-reached value and one signal. N submissions per
//              batch are timed on the submitting thread (the queue drains
//              between batches, untimed); the median batch is reported in ns
//              per submission.
//   pingpong   Cross-queue ping-pong: queue A waits on B's semaphore and
//              signals its own, B does the reverse, for R rounds. Every round
//              is submitted up front; each of A's host calls stamps the time,
//              and a round trip is the gap between consecutive stamps.
//              Reported as the median (and p90) in microseconds.
//   host-rtt   The same round trip observed from the host: submit one round,
//              block on B's signal, repeat. A host wait spins briefly before
//              it sleeps (base/spin.h), which is why the round trip is
//              short; what that costs is reported beside it: CPU time per
//              round of the waiting thread and of the whole process (every
//              hipline thread included), from CLOCK_THREAD_CPUTIME_ID and
//              CLOCK_PROCESS_CPUTIME_ID over all rounds.
//   release    A parked submission released by the host: a barrier waits on
//              a semaphore nobody has signalled (it parks) and signals
//              another; the host signals the first and blocks on the
//              second. The time from the signal to the end of the wait, and
//              the CPU it cost per round as for host-rtt.
//   contention T submitting threads (1, 2, 4), each on its own queue, each
//              submitting B batches of N empty submissions and draining its
//              queue after each batch. Two placements: every queue on one
//              shared device, and every queue on a device of its own. The
//              aggregate rate (all threads' submissions over the wall time
//              from a common start until the last thread is done) and its
//              ratio to one thread's rate show what the threads contend on.
//              Each configuration runs K times, interleaved; the median
//              run is reported.
//
// Usage: hipline-bench-timeline [--json] [--backend host|hip]
//                               [--submissions N] [--batches B] [--rounds R]
//                               [--contention-batches C]
//                               [--contention-repeats K]
//                               [--cpus free|same|split]
// Uses the public API only, and bench/cpu_placement.h for --cpus, which
// places the threads of submit, pingpong and host-rtt (on 2 cores a
// submission costs several times more when the submitter and the stream's
// worker run on different cores, and without placement the scheduler picks
// per run). The contention case creates its own threads; under same they
// share one CPU, under split every hipline thread moves to the second CPU
// once the queues exist, and the submitting threads stay on the first.

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>

#include "bench/cpu_placement.h"
#include "hipline/device.h"
#include "hipline/fence.h"
#include "hipline/queue.h"
#include "hipline/semaphore.h"
#include "hipline/time.h"

#define MS ((hl_duration_t)1000000)

static int check(hl_status_t st, const char* what) {
  if (!st) return 0;
  hl_status_fprint(stderr, what, st);
  hl_status_free(st);
  return 1;
}
#define CHECK(expr)                    \
  do {                                 \
    if (check((expr), #expr)) exit(1); \
  } while (0)

static int compare_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

// Sorts |v| and returns the element at |q| (0..1).
static int64_t quantile(int64_t* v, size_t n, double q) {
  qsort(v, n, sizeof(*v), compare_i64);
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

// CPU time of a host-waiting loop, per round, in microseconds: the thread
// that waits (its spin included) and the whole process.
typedef struct bench_cpu_t {
  double thread_us;
  double process_us;
} bench_cpu_t;

static int64_t cpu_clock_ns(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct cpu_mark_t {
  int64_t thread_ns;
  int64_t process_ns;
} cpu_mark_t;

static cpu_mark_t cpu_mark(void) {
  return (cpu_mark_t){cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID),
                      cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID)};
}

static bench_cpu_t cpu_since(cpu_mark_t start, int64_t rounds) {
  cpu_mark_t end = cpu_mark();
  return (bench_cpu_t){
      (double)(end.thread_ns - start.thread_ns) / 1e3 / (double)rounds,
      (double)(end.process_ns - start.process_ns) / 1e3 / (double)rounds};
}

typedef struct results_t {
  int64_t submissions;
  int batches;
  double submit_median_ns;
  double submit_min_ns;
  double submit_max_ns;
  int64_t rounds;
  double pingpong_median_us;
  double pingpong_p90_us;
  double host_rtt_median_us;
  double host_rtt_p90_us;
  bench_cpu_t host_rtt_cpu;
  double release_median_us;
  double release_p90_us;
  bench_cpu_t release_cpu;
  // contention[placement][threads index]: aggregate submissions per second;
  // placement 0 = one shared device, 1 = a device per thread.
  int contention_batches;
  int contention_repeats;
  double contention_rate[2][3];  // Medians over the repeats.
  bench_cpus_t cpus;
  double core_round_trip_ns;  // -1: not measured (fewer than two CPUs).
} results_t;

static const int kContentionThreads[3] = {1, 2, 4};
static const char* const kPlacementNames[2] = {"shared device",
                                               "device per thread"};

// Places hipline's threads as --cpus says, once the queues exist.
static void place_threads(const results_t* r) {
  if (!bench_cpus_place_runtime_threads(r->cpus)) exit(1);
}

static void bench_submit(hl_device_t* device, results_t* r) {
  hl_queue_t* queue = NULL;
  CHECK(hl_queue_create(device, &queue));
  place_threads(r);
  hl_semaphore_t* reached = NULL;
  hl_semaphore_t* out = NULL;
  CHECK(hl_semaphore_create(1, hl_allocator_system(), &reached));
  CHECK(hl_semaphore_create(0, hl_allocator_system(), &out));
  hl_fence_t* wait = NULL;
  hl_fence_t* signal = NULL;
  CHECK(hl_fence_create(hl_allocator_system(), &wait));
  CHECK(hl_fence_create(hl_allocator_system(), &signal));
  CHECK(hl_fence_insert(wait, reached, 1));
  int64_t* per = calloc((size_t)r->batches, sizeof(int64_t));
  uint64_t value = 0;
  for (int b = -1; b < r->batches; ++b) {  // Batch -1 warms up.
    hl_time_t start = hl_time_now();
    for (int64_t i = 0; i < r->submissions; ++i) {
      hl_fence_clear(signal);
      CHECK(hl_fence_insert(signal, out, ++value));
      CHECK(hl_queue_barrier(queue, wait, signal));
    }
    hl_time_t elapsed = hl_time_now() - start;
    CHECK(hl_queue_wait_idle(queue, hl_deadline_after(60000 * MS)));
    if (b >= 0) per[b] = elapsed;
  }
  r->submit_min_ns =
      (double)quantile(per, (size_t)r->batches, 0.0) / (double)r->submissions;
  r->submit_max_ns =
      (double)quantile(per, (size_t)r->batches, 1.0) / (double)r->submissions;
  r->submit_median_ns =
      (double)quantile(per, (size_t)r->batches, 0.5) / (double)r->submissions;
  free(per);
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_semaphore_release(reached);
  hl_semaphore_release(out);
  hl_queue_release(queue);
}

typedef struct stamp_t {
  int64_t* stamps;
  atomic_int_least64_t next;
} stamp_t;

static void stamp_fn(void* user) {
  stamp_t* s = (stamp_t*)user;
  int64_t i = atomic_fetch_add(&s->next, 1);
  s->stamps[i] = hl_time_now();
}

static void bench_pingpong(hl_device_t* device, results_t* r) {
  hl_queue_t* a = NULL;
  hl_queue_t* b = NULL;
  CHECK(hl_queue_create(device, &a));
  CHECK(hl_queue_create(device, &b));
  place_threads(r);
  hl_semaphore_t* sa = NULL;
  hl_semaphore_t* sb = NULL;
  CHECK(hl_semaphore_create(0, hl_allocator_system(), &sa));
  CHECK(hl_semaphore_create(0, hl_allocator_system(), &sb));
  hl_fence_t* wait = NULL;
  hl_fence_t* signal = NULL;
  CHECK(hl_fence_create(hl_allocator_system(), &wait));
  CHECK(hl_fence_create(hl_allocator_system(), &signal));

  // Device-side round trips: everything submitted up front.
  stamp_t stamp;
  stamp.stamps = calloc((size_t)r->rounds + 1, sizeof(int64_t));
  atomic_init(&stamp.next, 0);
  for (int64_t i = 1; i <= r->rounds; ++i) {
    hl_fence_clear(wait);
    hl_fence_clear(signal);
    if (i > 1) CHECK(hl_fence_insert(wait, sb, (uint64_t)i - 1));
    CHECK(hl_fence_insert(signal, sa, (uint64_t)i));
    CHECK(hl_queue_host_call(a, wait, signal, stamp_fn, &stamp));
    hl_fence_clear(wait);
    hl_fence_clear(signal);
    CHECK(hl_fence_insert(wait, sa, (uint64_t)i));
    CHECK(hl_fence_insert(signal, sb, (uint64_t)i));
    CHECK(hl_queue_barrier(b, wait, signal));
  }
  CHECK(hl_semaphore_wait(sb, (uint64_t)r->rounds,
                          hl_deadline_after(120000 * MS)));
  int64_t n = r->rounds - 1;
  int64_t* gaps = calloc((size_t)n, sizeof(int64_t));
  for (int64_t i = 0; i < n; ++i)
    gaps[i] = stamp.stamps[i + 1] - stamp.stamps[i];
  r->pingpong_median_us = (double)quantile(gaps, (size_t)n, 0.5) / 1e3;
  r->pingpong_p90_us = (double)quantile(gaps, (size_t)n, 0.9) / 1e3;

  // Host-observed round trips.
  uint64_t base = (uint64_t)r->rounds;
  cpu_mark_t cpu_start = cpu_mark();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t v = base + (uint64_t)i + 1;
    hl_time_t start = hl_time_now();
    hl_fence_clear(wait);
    hl_fence_clear(signal);
    CHECK(hl_fence_insert(wait, sb, v - 1));
    CHECK(hl_fence_insert(signal, sa, v));
    CHECK(hl_queue_barrier(a, wait, signal));
    hl_fence_clear(wait);
    hl_fence_clear(signal);
    CHECK(hl_fence_insert(wait, sa, v));
    CHECK(hl_fence_insert(signal, sb, v));
    CHECK(hl_queue_barrier(b, wait, signal));
    CHECK(hl_semaphore_wait(sb, v, hl_deadline_after(60000 * MS)));
    gaps[i] = hl_time_now() - start;
  }
  r->host_rtt_cpu = cpu_since(cpu_start, n);
  r->host_rtt_median_us = (double)quantile(gaps, (size_t)n, 0.5) / 1e3;
  r->host_rtt_p90_us = (double)quantile(gaps, (size_t)n, 0.9) / 1e3;
  CHECK(hl_queue_wait_idle(a, hl_deadline_after(60000 * MS)));
  CHECK(hl_queue_wait_idle(b, hl_deadline_after(60000 * MS)));
  free(gaps);
  free(stamp.stamps);
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_semaphore_release(sa);
  hl_semaphore_release(sb);
  hl_queue_release(a);
  hl_queue_release(b);
}

static void bench_release(hl_device_t* device, results_t* r) {
  hl_queue_t* q = NULL;
  CHECK(hl_queue_create(device, &q));
  place_threads(r);
  hl_semaphore_t* gate = NULL;
  hl_semaphore_t* done = NULL;
  CHECK(hl_semaphore_create(0, hl_allocator_system(), &gate));
  CHECK(hl_semaphore_create(0, hl_allocator_system(), &done));
  hl_fence_t* wait = NULL;
  hl_fence_t* signal = NULL;
  CHECK(hl_fence_create(hl_allocator_system(), &wait));
  CHECK(hl_fence_create(hl_allocator_system(), &signal));
  int64_t n = r->rounds;
  int64_t* gaps = calloc((size_t)n, sizeof(int64_t));
  cpu_mark_t cpu_start = cpu_mark();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t v = (uint64_t)i + 1;
    hl_fence_clear(wait);
    hl_fence_clear(signal);
    CHECK(hl_fence_insert(wait, gate, v));
    CHECK(hl_fence_insert(signal, done, v));
    CHECK(hl_queue_barrier(q, wait, signal));
    hl_time_t start = hl_time_now();
    CHECK(hl_semaphore_signal(gate, v));
    CHECK(hl_semaphore_wait(done, v, hl_deadline_after(60000 * MS)));
    gaps[i] = hl_time_now() - start;
  }
  r->release_cpu = cpu_since(cpu_start, n);
  r->release_median_us = (double)quantile(gaps, (size_t)n, 0.5) / 1e3;
  r->release_p90_us = (double)quantile(gaps, (size_t)n, 0.9) / 1e3;
  CHECK(hl_queue_wait_idle(q, hl_deadline_after(60000 * MS)));
  free(gaps);
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_semaphore_release(gate);
  hl_semaphore_release(done);
  hl_queue_release(q);
}

typedef struct contention_thread_t {
  hl_queue_t* queue;
  int64_t submissions;
  int batches;
  atomic_int* ready;  // Threads that have set up; they start together.
  int thread_count;
  hl_time_t start;  // After the common start line.
  hl_time_t end;
} contention_thread_t;

static int contention_main(void* arg) {
  contention_thread_t* t = (contention_thread_t*)arg;
  hl_semaphore_t* reached = NULL;
  hl_semaphore_t* out = NULL;
  CHECK(hl_semaphore_create(1, hl_allocator_system(), &reached));
  CHECK(hl_semaphore_create(0, hl_allocator_system(), &out));
  hl_fence_t* wait = NULL;
  hl_fence_t* signal = NULL;
  CHECK(hl_fence_create(hl_allocator_system(), &wait));
  CHECK(hl_fence_create(hl_allocator_system(), &signal));
  CHECK(hl_fence_insert(wait, reached, 1));
  // Start together: the last thread to arrive releases the others.
  atomic_fetch_add(t->ready, 1);
  while (atomic_load(t->ready) < t->thread_count) thrd_yield();
  t->start = hl_time_now();
  uint64_t value = 0;
  for (int b = 0; b < t->batches; ++b) {
    for (int64_t i = 0; i < t->submissions; ++i) {
      hl_fence_clear(signal);
      CHECK(hl_fence_insert(signal, out, ++value));
      CHECK(hl_queue_barrier(t->queue, wait, signal));
    }
    CHECK(hl_queue_wait_idle(t->queue, hl_deadline_after(60000 * MS)));
  }
  t->end = hl_time_now();
  hl_fence_release(wait);
  hl_fence_release(signal);
  hl_semaphore_release(reached);
  hl_semaphore_release(out);
  return 0;
}

// Aggregate submissions per second of |thread_count| threads, each on its
// own queue; the queues share |shared| or, when it is NULL, each gets a
// device of its own made from |options|.
static double contention_run(const hl_device_options_t* options,
                             hl_device_t* shared, int thread_count,
                             const results_t* r) {
  contention_thread_t threads[4];
  hl_device_t* devices[4] = {NULL, NULL, NULL, NULL};
  thrd_t handles[4];
  atomic_int ready;
  atomic_init(&ready, 0);
  for (int i = 0; i < thread_count; ++i) {
    hl_device_t* device = shared;
    if (!device) {
      CHECK(hl_device_create(options, hl_allocator_system(), &devices[i]));
      device = devices[i];
    }
    threads[i] = (contention_thread_t){.submissions = r->submissions,
                                       .batches = r->contention_batches,
                                       .ready = &ready,
                                       .thread_count = thread_count};
    CHECK(hl_queue_create(device, &threads[i].queue));
  }
  place_threads(r);
  for (int i = 0; i < thread_count; ++i) {
    if (thrd_create(&handles[i], contention_main, &threads[i]) !=
        thrd_success) {
      fprintf(stderr, "cannot start a submitting thread\n");
      exit(1);
    }
  }
  // From the first thread past the start line to the last one done.
  hl_time_t start = HL_INFINITE_FUTURE, end = 0;
  for (int i = 0; i < thread_count; ++i) {
    thrd_join(handles[i], NULL);
    if (threads[i].start < start) start = threads[i].start;
    if (threads[i].end > end) end = threads[i].end;
    hl_queue_release(threads[i].queue);
    if (devices[i]) hl_device_release(devices[i]);
  }
  double total = (double)thread_count * (double)r->submissions *
                 (double)r->contention_batches;
  return total / ((double)(end - start) / 1e9);
}

static int compare_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

// Each configuration runs |contention_repeats| times, the repeats
// interleaved (every configuration once, then again), and reports its
// median: on a shared 2-core virtual machine one run of a few milliseconds
// says as much about the neighbours as about hipline.
#define CONTENTION_REPEATS_MAX 64
static void bench_contention(const hl_device_options_t* options,
                             hl_device_t* device, results_t* r) {
  double rates[2][3][CONTENTION_REPEATS_MAX];
  for (int k = 0; k < r->contention_repeats; ++k) {
    for (int p = 0; p < 2; ++p) {
      for (int t = 0; t < 3; ++t) {
        rates[p][t][k] = contention_run(options, p == 0 ? device : NULL,
                                        kContentionThreads[t], r);
      }
    }
  }
  for (int p = 0; p < 2; ++p) {
    for (int t = 0; t < 3; ++t) {
      qsort(rates[p][t], (size_t)r->contention_repeats, sizeof(double),
            compare_double);
      int n = r->contention_repeats;
      r->contention_rate[p][t] =
          n % 2 ? rates[p][t][n / 2]
                : (rates[p][t][n / 2 - 1] + rates[p][t][n / 2]) / 2;
    }
  }
}

static int64_t parse_count(const char* flag, const char* value, int64_t min) {
  char* end = NULL;
  long long v = value ? strtoll(value, &end, 10) : 0;
  if (!value || !*value || *end || v < min) {
    fprintf(stderr, "%s needs an integer >= %lld\n", flag, (long long)min);
    exit(2);
  }
  return (int64_t)v;
}

int main(int argc, char** argv) {
  results_t r;
  memset(&r, 0, sizeof(r));
  r.submissions =
      1000;  // In flight at once: larger batches measure queue depth too.
  r.batches = 15;
  r.rounds = 2000;
  r.contention_batches = 20;
  r.contention_repeats = 5;
  bool json = false;
  hl_backend_kind_t backend = HL_BACKEND_HOST;
  for (int i = 1; i < argc; ++i) {
    const char* next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--submissions") == 0) {
      r.submissions = parse_count(argv[i], next, 1);
      ++i;
    } else if (strcmp(argv[i], "--batches") == 0) {
      r.batches = (int)parse_count(argv[i], next, 1);
      ++i;
    } else if (strcmp(argv[i], "--rounds") == 0) {
      r.rounds = parse_count(argv[i], next, 2);
      ++i;
    } else if (strcmp(argv[i], "--contention-batches") == 0) {
      r.contention_batches = (int)parse_count(argv[i], next, 1);
      ++i;
    } else if (strcmp(argv[i], "--contention-repeats") == 0) {
      r.contention_repeats = (int)parse_count(argv[i], next, 1);
      if (r.contention_repeats > CONTENTION_REPEATS_MAX) {
        fprintf(stderr, "--contention-repeats: at most %d\n",
                CONTENTION_REPEATS_MAX);
        exit(2);
      }
      ++i;
    } else if (strcmp(argv[i], "--cpus") == 0) {
      if (!bench_cpus_parse(next, &r.cpus)) {
        fprintf(stderr, "--cpus needs 'free', 'same' or 'split'\n");
        return 2;
      }
      ++i;
    } else if (strcmp(argv[i], "--backend") == 0) {
      if (next && strcmp(next, "host") == 0) {
        backend = HL_BACKEND_HOST;
      } else if (next && strcmp(next, "hip") == 0) {
        backend = HL_BACKEND_HIP;
      } else {
        fprintf(stderr, "--backend needs 'host' or 'hip'\n");
        return 2;
      }
      ++i;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: %s [--json] [--backend host|hip] [--submissions N]\n"
          "       [--batches B] [--rounds R] [--contention-batches C]\n"
          "       [--contention-repeats K]\n"
          "       [--cpus free|same|split]\n",
          argv[0]);
      return 0;
    } else {
      fprintf(stderr, "unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }

  // Before any placement: it pins its own two threads.
  r.core_round_trip_ns = bench_cpus_core_round_trip_ns(100000);
  if (!bench_cpus_begin(r.cpus)) return 1;
  hl_device_options_t options;
  hl_device_options_initialize(&options);
  options.backend = backend;
  const char* backend_name = hl_backend_kind_name(backend);
  hl_device_t* device = NULL;
  CHECK(hl_device_create(&options, hl_allocator_system(), &device));
  bench_submit(device, &r);
  bench_pingpong(device, &r);
  bench_release(device, &r);
  bench_contention(&options, device, &r);
  hl_device_release(device);

  if (json) {
    printf(
        "{\"backend\": \"%s\", \"cpus\": \"%s\", "
        "\"core_round_trip_ns\": %.1f, \"submit\": "
        "{\"submissions_per_batch\": %lld, "
        "\"batches\": %d, \"median_ns\": %.1f, \"min_ns\": %.1f, "
        "\"max_ns\": %.1f}, \"pingpong\": {\"rounds\": %lld, "
        "\"median_us\": %.2f, \"p90_us\": %.2f}, \"host_rtt\": "
        "{\"rounds\": %lld, \"median_us\": %.2f, \"p90_us\": %.2f, "
        "\"waiter_cpu_us\": %.2f, \"process_cpu_us\": %.2f}, "
        "\"release\": {\"rounds\": %lld, \"median_us\": %.2f, "
        "\"p90_us\": %.2f, \"waiter_cpu_us\": %.2f, "
        "\"process_cpu_us\": %.2f}, "
        "\"contention\": {\"submissions_per_batch\": %lld, \"batches\": %d, "
        "\"repeats\": %d, "
        "\"shared_device\": {\"1\": %.0f, \"2\": %.0f, \"4\": %.0f}, "
        "\"device_per_thread\": {\"1\": %.0f, \"2\": %.0f, \"4\": "
        "%.0f}}}\n",
        backend_name, bench_cpus_name(r.cpus), r.core_round_trip_ns,
        (long long)r.submissions, r.batches, r.submit_median_ns,
        r.submit_min_ns, r.submit_max_ns, (long long)r.rounds,
        r.pingpong_median_us, r.pingpong_p90_us, (long long)r.rounds - 1,
        r.host_rtt_median_us, r.host_rtt_p90_us, r.host_rtt_cpu.thread_us,
        r.host_rtt_cpu.process_us, (long long)r.rounds, r.release_median_us,
        r.release_p90_us, r.release_cpu.thread_us, r.release_cpu.process_us,
        (long long)r.submissions, r.contention_batches, r.contention_repeats,
        r.contention_rate[0][0], r.contention_rate[0][1],
        r.contention_rate[0][2], r.contention_rate[1][0],
        r.contention_rate[1][1], r.contention_rate[1][2]);
  } else {
    printf("hipline timeline benchmarks (%s backend, --cpus %s)\n",
           backend_name, bench_cpus_name(r.cpus));
    printf("%-34s %12s %12s %12s\n", "benchmark", "median", "min/p90", "max");
    printf("%-34s %9.1f ns %9.1f ns %9.1f ns\n",
           "empty submission (wait+signal)", r.submit_median_ns,
           r.submit_min_ns, r.submit_max_ns);
    printf("%-34s %9.2f us %9.2f us %12s\n", "ping-pong round trip (queues)",
           r.pingpong_median_us, r.pingpong_p90_us, "");
    printf("%-34s %9.2f us %9.2f us %12s\n", "ping-pong round trip (host wait)",
           r.host_rtt_median_us, r.host_rtt_p90_us, "");
    printf("%-34s %9.2f us %9.2f us %12s\n", "parked submission, host release",
           r.release_median_us, r.release_p90_us, "");
    printf("%-34s %9.2f us %9.2f us\n", "  CPU per host round trip",
           r.host_rtt_cpu.thread_us, r.host_rtt_cpu.process_us);
    printf("%-34s %9.2f us %9.2f us\n", "  CPU per host release",
           r.release_cpu.thread_us, r.release_cpu.process_us);
    printf(
        "(CPU: the waiting thread's, then the whole process's, per round;\n"
        " host waits spin briefly before they sleep)\n");
    printf("(%lld submissions x %d batches; %lld rounds)\n",
           (long long)r.submissions, r.batches, (long long)r.rounds);
    bench_cpus_print_round_trip(r.core_round_trip_ns);
    printf(
        "\ncontention: aggregate empty submissions per second, each thread "
        "on its own queue (%lld x %d each; median of %d runs)\n",
        (long long)r.submissions, r.contention_batches, r.contention_repeats);
    printf("%-20s %14s %14s %14s\n", "placement", "1 thread", "2 threads",
           "4 threads");
    for (int p = 0; p < 2; ++p) {
      printf("%-20s", kPlacementNames[p]);
      for (int t = 0; t < 3; ++t) {
        printf(" %8.0f/s %4.2fx", r.contention_rate[p][t],
               r.contention_rate[p][t] / r.contention_rate[p][0]);
      }
      putchar('\n');
    }
  }
  return 0;
}
