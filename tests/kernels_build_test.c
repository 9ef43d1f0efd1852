// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Build-level checks, registered only when hipcc built code objects: the
// build record names each requested target exactly once (duplicates in
// HIPLINE_GPU_TARGETS collapse), and every code object, on disk and embedded,
// really contains code for its target. The clang offload bundle is parsed
// here independently of the runtime:
//   "__CLANG_OFFLOAD_BUNDLE__" (24 bytes), uint64 entry count, then per entry
//   uint64 offset, uint64 size, uint64 triple length, triple bytes
// (little endian); a GPU entry's triple is "hipv4-amdgcn-amd-amdhsa--<target>"
// and its bytes are an AMDGPU ELF whose e_flags carry the processor. A plain
// clang build embeds that ELF bare. Either way the ELF must define every
// kernel of kernels/kernel_table.h: the function and its ".kd" descriptor.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
// cmocka.h needs the headers above.
#include <cmocka.h>

#include "hipline/executable.h"
#include "kernels/kernel_table.h"

#ifndef HL_TEST_BUILD_RECORD
#error "HL_TEST_BUILD_RECORD must name kernels/built_targets.txt"
#endif

enum { kMaxEntries = 64 };

typedef struct record_entry_t {
  char kind[16];  // "built" or "skipped"
  char target[HL_TARGET_ID_MAX];
  unsigned long long size;
  char path[1024];
} record_entry_t;

static size_t read_record(record_entry_t* entries) {
  FILE* file = fopen(HL_TEST_BUILD_RECORD, "r");
  if (file == NULL) fail_msg("cannot open %s", HL_TEST_BUILD_RECORD);
  char line[2048];
  size_t count = 0;
  while (fgets(line, sizeof(line), file) != NULL) {
    if (line[0] == '#' || line[0] == '\n') continue;
    assert_true(count < kMaxEntries);
    record_entry_t* e = &entries[count++];
    memset(e, 0, sizeof(*e));
    line[strcspn(line, "\n")] = '\0';
    char* kind = strtok(line, "\t");
    char* target = strtok(NULL, "\t");
    assert_non_null(kind);
    assert_non_null(target);
    snprintf(e->kind, sizeof(e->kind), "%s", kind);
    snprintf(e->target, sizeof(e->target), "%s", target);
    if (strcmp(kind, "built") == 0) {
      char* size = strtok(NULL, "\t");
      char* path = strtok(NULL, "\t");
      assert_non_null(size);
      assert_non_null(path);
      e->size = strtoull(size, NULL, 10);
      snprintf(e->path, sizeof(e->path), "%s", path);
    } else {
      assert_string_equal(kind, "skipped");
      assert_non_null(strtok(NULL, "\t"));  // A reason is given.
    }
  }
  fclose(file);
  return count;
}

static void test_each_requested_target_once(void** state) {
  record_entry_t entries[kMaxEntries];
  size_t count = read_record(entries);

  // Distinct canonical targets of the requested list, in order.
  char requested[4096];
  snprintf(requested, sizeof(requested), "%s", HL_TEST_REQUESTED_TARGETS);
  char distinct[kMaxEntries][HL_TARGET_ID_MAX];
  size_t distinct_count = 0;
  for (char* t = strtok(requested, ","); t; t = strtok(NULL, ",")) {
    char canonical[HL_TARGET_ID_MAX];
    assert_null(hl_target_id_canonicalize(t, canonical, sizeof(canonical)));
    bool seen = false;
    for (size_t i = 0; i < distinct_count; ++i) {
      seen = seen || strcmp(distinct[i], canonical) == 0;
    }
    if (!seen) {
      assert_true(distinct_count < kMaxEntries);
      memcpy(distinct[distinct_count++], canonical, sizeof(canonical));
    }
  }
  assert_int_equal(count, distinct_count);
  for (size_t i = 0; i < distinct_count; ++i) {
    size_t hits = 0;
    for (size_t j = 0; j < count; ++j) {
      hits += strcmp(entries[j].target, distinct[i]) == 0;
    }
    if (hits != 1) {
      fail_msg("target %s appears %zu times in the build record", distinct[i],
               hits);
    }
  }

#ifdef HL_TEST_EXPECT_ALL_TARGETS
  // A plain clang was found: it builds every target of the default list, so
  // a skip there is a build regression, not a toolchain limit.
  for (size_t j = 0; j < count; ++j) {
    if (strcmp(entries[j].kind, "built") != 0) {
      fail_msg("target %s was skipped although a plain clang is available",
               entries[j].target);
    }
  }
#endif

  // The library embeds exactly the built targets, in record order.
  size_t built = 0;
  for (size_t j = 0; j < count; ++j) {
    if (strcmp(entries[j].kind, "built") != 0) continue;
    assert_string_equal(hl_executable_gpu_target(built), entries[j].target);
    ++built;
  }
  assert_int_equal(hl_executable_gpu_target_count(), built);
}

static uint64_t load_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

static uint32_t load_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint16_t load_u16(const uint8_t* p) {
  return (uint16_t)(p[0] | p[1] << 8);
}

// Whether the symbol tables of |elf| define |name| with ELF symbol type
// |type| (STT_FUNC 2, STT_OBJECT 1) in a section.
static bool elf_defines(const uint8_t* elf, size_t size, const char* name,
                        unsigned type) {
  uint64_t shoff = load_u64(elf + 40);
  uint16_t shentsize = load_u16(elf + 58);
  uint16_t shnum = load_u16(elf + 60);
  assert_true(shentsize >= 64);
  assert_true(shoff <= size && (uint64_t)shnum * shentsize <= size - shoff);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint8_t* sh = elf + shoff + (uint64_t)i * shentsize;
    uint32_t sh_type = load_u32(sh + 4);
    if (sh_type != 2 && sh_type != 11) continue;  // SHT_SYMTAB, SHT_DYNSYM
    uint64_t offset = load_u64(sh + 24), bytes = load_u64(sh + 32);
    uint32_t link = load_u32(sh + 40);
    uint64_t entsize = load_u64(sh + 56);
    assert_true(entsize >= 24 && link < shnum);
    assert_true(offset <= size && bytes <= size - offset);
    const uint8_t* strtab_sh = elf + shoff + (uint64_t)link * shentsize;
    uint64_t str_offset = load_u64(strtab_sh + 24);
    uint64_t str_bytes = load_u64(strtab_sh + 32);
    assert_true(str_offset <= size && str_bytes <= size - str_offset);
    for (uint64_t at = 0; at + entsize <= bytes; at += entsize) {
      const uint8_t* sym = elf + offset + at;
      uint32_t st_name = load_u32(sym);
      uint16_t shndx = load_u16(sym + 6);
      if ((sym[4] & 0xfu) != type || shndx == 0 || st_name >= str_bytes) {
        continue;
      }
      const char* sym_name = (const char*)elf + str_offset + st_name;
      size_t room = (size_t)(str_bytes - st_name);
      if (strnlen(sym_name, room) < room && strcmp(sym_name, name) == 0) {
        return true;
      }
    }
  }
  return false;
}

// Every kernel of the table is in the code object, with its descriptor.
static void check_kernel_symbols(const uint8_t* elf, size_t size,
                                 const char* target) {
  static const char* const kernels[] = {
#define HL_KERNEL_NAME_(ID, name, count, types) #name,
      HL_KERNEL_TABLE(HL_KERNEL_NAME_)
#undef HL_KERNEL_NAME_
  };
  for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); ++i) {
    char descriptor[128];
    snprintf(descriptor, sizeof(descriptor), "%s.kd", kernels[i]);
    if (!elf_defines(elf, size, kernels[i], 2)) {
      fail_msg("%s code object lacks kernel function %s", target, kernels[i]);
    }
    if (!elf_defines(elf, size, descriptor, 1)) {
      fail_msg("%s code object lacks kernel descriptor %s", target, descriptor);
    }
  }
}

// The EF_AMDGPU_MACH_* value of known processors (LLVM's ELF.h), 0 if unknown.
static uint32_t amdgpu_mach(const char* processor) {
  static const struct {
    const char* name;
    uint32_t mach;
  } table[] = {{"gfx900", 0x2c},  {"gfx906", 0x2f},  {"gfx908", 0x30},
               {"gfx90a", 0x3f},  {"gfx940", 0x40},  {"gfx942", 0x4c},
               {"gfx1030", 0x36}, {"gfx1100", 0x41}, {"gfx1200", 0x48},
               {"gfx1201", 0x4e}};
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
    if (strcmp(table[i].name, processor) == 0) return table[i].mach;
  }
  return 0;
}

// Checks that |elf| is an AMDGPU code object for |target|'s processor.
static void check_elf(const uint8_t* elf, size_t size, const char* target) {
  assert_true(size > 64);
  assert_memory_equal(elf, "\177ELF", 4);
  assert_int_equal(elf[4], 2);  // ELFCLASS64
  uint16_t machine = (uint16_t)(elf[18] | elf[19] << 8);
  assert_int_equal(machine, 224);  // EM_AMDGPU
  uint32_t flags = (uint32_t)elf[48] | (uint32_t)elf[49] << 8 |
                   (uint32_t)elf[50] << 16 | (uint32_t)elf[51] << 24;
  char processor[HL_TARGET_ID_MAX];
  snprintf(processor, sizeof(processor), "%s", target);
  processor[strcspn(processor, ":")] = '\0';
  uint32_t mach = amdgpu_mach(processor);
  if (mach == 0) fail_msg("no EF_AMDGPU_MACH known for %s", processor);
  assert_int_equal(flags & 0xffu, mach);
  check_kernel_symbols(elf, size, target);
}

// Checks that |data| holds code for |target|: a bundle with a matching
// hipv4 entry, or a plain ELF.
static void check_code_object(const uint8_t* data, size_t size,
                              const char* target) {
  if (size >= 4 && memcmp(data, "\177ELF", 4) == 0) {
    check_elf(data, size, target);
    return;
  }
  assert_true(size > 32);
  assert_memory_equal(data, "__CLANG_OFFLOAD_BUNDLE__", 24);
  uint64_t entries = load_u64(data + 24);
  assert_true(entries >= 1 && entries < 64);
  char want[256];
  snprintf(want, sizeof(want), "hipv4-amdgcn-amd-amdhsa--%s", target);
  size_t at = 32, found = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    assert_true(at + 24 <= size);
    uint64_t offset = load_u64(data + at);
    uint64_t length = load_u64(data + at + 8);
    uint64_t triple_length = load_u64(data + at + 16);
    at += 24;
    assert_true(triple_length < 256 && at + triple_length <= size);
    assert_true(offset <= size && length <= size - offset);
    if (triple_length == strlen(want) &&
        memcmp(data + at, want, triple_length) == 0) {
      ++found;
      check_elf(data + offset, (size_t)length, target);
    } else {
      // Any other entry is the (empty) host part.
      assert_memory_equal(data + at, "host-", 5);
    }
    at += triple_length;
  }
  if (found != 1) fail_msg("bundle has %zu entries for %s", found, want);
}

static void test_code_objects_contain_their_target(void** state) {
  record_entry_t entries[kMaxEntries];
  size_t count = read_record(entries);
  size_t built = 0;
  for (size_t j = 0; j < count; ++j) {
    if (strcmp(entries[j].kind, "built") != 0) continue;
    FILE* file = fopen(entries[j].path, "rb");
    if (file == NULL) fail_msg("cannot open %s", entries[j].path);
    uint8_t* bytes = malloc(entries[j].size + 1);
    assert_non_null(bytes);
    size_t size = fread(bytes, 1, entries[j].size + 1, file);
    fclose(file);
    assert_int_equal(size, entries[j].size);
    check_code_object(bytes, size, entries[j].target);

    // The embedded copy is the same bytes.
    const void* data = NULL;
    size_t embedded_size = 0;
    assert_null(hl_executable_gpu_code_object(built, &data, &embedded_size));
    assert_int_equal(embedded_size, size);
    assert_memory_equal(data, bytes, size);
    check_code_object(data, embedded_size, entries[j].target);
    free(bytes);
    ++built;
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_requested_target_once),
      cmocka_unit_test(test_code_objects_contain_their_target),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
