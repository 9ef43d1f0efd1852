// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The fill/verify pattern, shared verbatim by the device kernels (HIP C++)
// and the host reference versions (C11).
//
// Word |index| of a buffer filled with |seed| is the high half of the
// SplitMix64 output function (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", 2014) applied to
//   x = ((uint64_t)seed << 32) ^ index,
// which for index < 2^32 is (seed << 32 | index). The finalizer is a
// bijection on 64 bits with full avalanche, so nearby indices and nearby
// seeds give unrelated words, a word is never the same as its neighbour by
// construction, and zeroed or stale memory fails verification with
// overwhelming probability. Only the high 32 bits of the 64-bit result are
// kept, so two (seed, index) pairs can share a word, with probability 2^-32.
#ifndef HIPLINE_KERNELS_PATTERN_H_
#define HIPLINE_KERNELS_PATTERN_H_

#include <stdint.h>

#if defined(__HIP__) || defined(__CUDACC__)
#define HL_PATTERN_QUALIFIERS static inline __host__ __device__
#else
#define HL_PATTERN_QUALIFIERS static inline
#endif

// Returns word |index| of the pattern for |seed|.
HL_PATTERN_QUALIFIERS uint32_t hl_pattern_word(uint32_t seed, uint64_t index) {
  uint64_t z = (((uint64_t)seed << 32) ^ index) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (uint32_t)(z >> 32);
}

#endif  // HIPLINE_KERNELS_PATTERN_H_
