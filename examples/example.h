// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What every example shares: stop with the status's message on an error, and
// a fence that names one semaphore value.
#ifndef HIPLINE_EXAMPLES_EXAMPLE_H_
#define HIPLINE_EXAMPLES_EXAMPLE_H_

#include <stdio.h>
#include <stdlib.h>

#include "hipline/hipline.h"

// Prints |status| (which it consumes) and exits 1 when it is an error.
#define CHECK_OK(expr)                                     \
  do {                                                     \
    hl_status_t check_status_ = (expr);                    \
    if (check_status_) {                                   \
      hl_status_fprint(stderr, #expr ": ", check_status_); \
      hl_status_free(check_status_);                       \
      exit(1);                                             \
    }                                                      \
  } while (0)

// Exits 1 with |message| when |condition| does not hold.
#define CHECK_TRUE(condition, ...)                       \
  do {                                                   \
    if (!(condition)) {                                  \
      fprintf(stderr, "check failed: %s: ", #condition); \
      fprintf(stderr, __VA_ARGS__);                      \
      fputc('\n', stderr);                               \
      exit(1);                                           \
    }                                                    \
  } while (0)

// A new fence holding |semaphore|@|value| (the caller releases it).
static inline hl_fence_t* example_fence(hl_semaphore_t* semaphore,
                                        uint64_t value) {
  hl_fence_t* fence = NULL;
  CHECK_OK(hl_fence_create(hl_allocator_system(), &fence));
  CHECK_OK(hl_fence_insert(fence, semaphore, value));
  return fence;
}

#endif  // HIPLINE_EXAMPLES_EXAMPLE_H_
