// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Per-entry HIP call counts, for the hip test runtime and the HIP-on-CUDA
// bridge (test code only, never shipped).
//
// With HL_HIP_TEST_RUNTIME_CALL_COUNTS=FILE set, each library counts every
// call of each of its HIP entry points and writes FILE at exit (or when it
// is unloaded): a header line starting with '#', then one line per entry
// called at least once,
//   NAME TOTAL CALLER RUNTIME
// whitespace-separated. RUNTIME counts calls from hipline's own threads and
// from the library's own (its stream workers and callback thread: hipline's
// host functions run there); CALLER counts calls from every other thread,
// the embedder's submitting threads. hipline names each thread it creates
// "hl-..." (hl_thread_set_name, first thing in the thread); the library
// says which threads are its own (hl_call_counts_library_thread). The
// thread's name is read at each counted call: no thread-local state, which
// LeakSanitizer's thread scan trips over in a dlopened library's threads.
//
// Counts are deterministic for a deterministic workload; tests take the
// difference of two run lengths so that set-up cancels.
#ifndef HIPLINE_TESTS_HIP_TEST_RUNTIME_CALL_COUNTS_H_
#define HIPLINE_TESTS_HIP_TEST_RUNTIME_CALL_COUNTS_H_

#include <stdbool.h>
#include <stddef.h>

#define HL_CALL_COUNTS_ENV "HL_HIP_TEST_RUNTIME_CALL_COUNTS"

// The most entries one library counts.
#define HL_CALL_COUNTS_MAX 160

// The entries' names, defined by the library that counts (at most
// HL_CALL_COUNTS_MAX).
extern const char* const hl_call_counts_names[];
extern const size_t hl_call_counts_name_count;

// Counts one call of entry |index| of hl_call_counts_names. The first call
// reads the environment; without the variable every call is a load and a
// branch. Thread-safe.
void hl_call_counts_add(size_t index);

// Whether the calling thread, named |thread_name|, is the library's own
// (defined by the library that counts).
bool hl_call_counts_library_thread(const char* thread_name);

// Whether the calling thread is hipline's or the library's own.
bool hl_call_counts_on_runtime_thread(void);

#endif  // HIPLINE_TESTS_HIP_TEST_RUNTIME_CALL_COUNTS_H_
