// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Code object readers (code_object.h): offload bundles, AMDGPU ELF notes,
// and the AMDGPU metadata (msgpack, read with msgpack-c).
#include "runtime/executable/code_object.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HL_BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define HL_BUNDLE_MAGIC_SIZE (sizeof(HL_BUNDLE_MAGIC) - 1)
#define HL_EM_AMDGPU 224
#define HL_NT_AMDGPU_METADATA 32
#define HL_SHT_NOTE 7

static uint64_t hl_read_u64(const unsigned char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static uint32_t hl_read_u32(const unsigned char* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint16_t hl_read_u16(const unsigned char* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

bool hl_code_object_is_bundle(const void* data, size_t size) {
  return data && size >= HL_BUNDLE_MAGIC_SIZE &&
         memcmp(data, HL_BUNDLE_MAGIC, HL_BUNDLE_MAGIC_SIZE) == 0;
}

bool hl_code_object_is_amdgpu_elf(const void* data, size_t size) {
  const unsigned char* p = data;
  return data && size >= 64 &&
         memcmp(p,
                "\x7f"
                "ELF",
                4) == 0 &&
         p[4] == 2 /* ELFCLASS64 */ && p[5] == 1 /* little-endian */ &&
         hl_read_u16(p + 18) == HL_EM_AMDGPU;
}

//===----------------------------------------------------------------------===//
// Offload bundles
//===----------------------------------------------------------------------===//

hl_status_t hl_code_object_bundle_walk(const void* data, size_t size,
                                       hl_bundle_visit_fn_t visit, void* user) {
  if (!hl_code_object_is_bundle(data, size) ||
      size < HL_BUNDLE_MAGIC_SIZE + 8) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "not a clang offload bundle (no " HL_BUNDLE_MAGIC
                          " magic and entry count)");
  }
  const unsigned char* base = data;
  size_t at = HL_BUNDLE_MAGIC_SIZE;
  uint64_t count = hl_read_u64(base + at);
  at += 8;
  if (count == 0 || count > 1024) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "offload bundle: %llu entries",
                          (unsigned long long)count);
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (size - at < 24) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "offload bundle: entry %llu's header is past the "
                            "%zu-byte end",
                            (unsigned long long)i, size);
    }
    uint64_t offset = hl_read_u64(base + at);
    uint64_t length = hl_read_u64(base + at + 8);
    uint64_t id_size = hl_read_u64(base + at + 16);
    at += 24;
    hl_bundle_entry_t entry;
    if (id_size > size - at || id_size >= sizeof(entry.id)) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "offload bundle: entry %llu's %llu-byte id does "
                            "not fit",
                            (unsigned long long)i, (unsigned long long)id_size);
    }
    memcpy(entry.id, base + at, id_size);
    entry.id[id_size] = '\0';
    at += id_size;
    if (offset > size || length > size - offset) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "offload bundle: entry '%s' [%llu, +%llu) is past "
                            "the %zu-byte end",
                            entry.id, (unsigned long long)offset,
                            (unsigned long long)length, size);
    }
    entry.data = base + offset;
    entry.size = (size_t)length;
    hl_status_t st = visit(user, &entry);
    if (st) return st;
  }
  return NULL;
}

bool hl_code_object_bundle_target(const char* id, char* out, size_t capacity) {
  static const char kTriple[] = "amdgcn-amd-amdhsa-";
  const char* triple = strstr(id, kTriple);
  if (!triple) return false;
  // The triple has four fields ("amdgcn-amd-amdhsa-" plus an empty
  // environment), then '-' and the target id.
  const char* target = triple + sizeof(kTriple) - 1;
  if (*target == '-') ++target;
  int n = snprintf(out, capacity, "%s", target);
  return n > 0 && (size_t)n < capacity;
}

//===----------------------------------------------------------------------===//
// ELF notes
//===----------------------------------------------------------------------===//

// Looks for the AMDGPU metadata note in the note section [off, off+len).
static bool hl_find_note(const unsigned char* p, size_t len,
                         const void** out_desc, size_t* out_size) {
  size_t at = 0;
  while (len - at >= 12) {
    uint32_t namesz = hl_read_u32(p + at);
    uint32_t descsz = hl_read_u32(p + at + 4);
    uint32_t type = hl_read_u32(p + at + 8);
    at += 12;
    size_t name_pad = ((size_t)namesz + 3) & ~(size_t)3;
    size_t desc_pad = ((size_t)descsz + 3) & ~(size_t)3;
    if (name_pad > len - at || descsz > len - at - name_pad) return false;
    bool amdgpu = namesz == 7 && memcmp(p + at, "AMDGPU", 7) == 0;
    at += name_pad;
    if (amdgpu && type == HL_NT_AMDGPU_METADATA) {
      *out_desc = p + at;
      *out_size = descsz;
      return true;
    }
    if (desc_pad > len - at) return false;
    at += desc_pad;
  }
  return false;
}

hl_status_t hl_code_object_metadata_note(const void* data, size_t size,
                                         const void** out_desc,
                                         size_t* out_size) {
  if (!hl_code_object_is_amdgpu_elf(data, size)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "not a 64-bit little-endian AMDGPU ELF");
  }
  const unsigned char* p = data;
  uint64_t shoff = hl_read_u64(p + 40);
  uint16_t shentsize = hl_read_u16(p + 58);
  uint16_t shnum = hl_read_u16(p + 60);
  if (shentsize < 64 || shoff > size ||
      (uint64_t)shentsize * shnum > size - shoff) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "ELF section headers (%u of %u bytes at %llu) are "
                          "past the %zu-byte end",
                          shnum, shentsize, (unsigned long long)shoff, size);
  }
  for (uint16_t i = 0; i < shnum; ++i) {
    const unsigned char* sh = p + shoff + (uint64_t)i * shentsize;
    if (hl_read_u32(sh + 4) != HL_SHT_NOTE) continue;
    uint64_t off = hl_read_u64(sh + 24);
    uint64_t len = hl_read_u64(sh + 32);
    if (off > size || len > size - off) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "ELF note section %u is past the %zu-byte end", i,
                            size);
    }
    if (hl_find_note(p + off, (size_t)len, out_desc, out_size)) return NULL;
  }
  return HL_MAKE_STATUS(HL_STATUS_NOT_FOUND,
                        "the ELF has no AMDGPU metadata note "
                        "(NT_AMDGPU_METADATA)");
}

//===----------------------------------------------------------------------===//
// Metadata
//===----------------------------------------------------------------------===//

static const struct {
  const char* name;
  hl_kernel_value_kind_t kind;
} kValueKinds[] = {
    {"by_value", HL_KERNEL_VALUE_BY_VALUE},
    {"global_buffer", HL_KERNEL_VALUE_GLOBAL_BUFFER},
    {"hidden_global_offset_x", HL_KERNEL_VALUE_HIDDEN_GLOBAL_OFFSET_X},
    {"hidden_global_offset_y", HL_KERNEL_VALUE_HIDDEN_GLOBAL_OFFSET_Y},
    {"hidden_global_offset_z", HL_KERNEL_VALUE_HIDDEN_GLOBAL_OFFSET_Z},
    {"hidden_block_count_x", HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_X},
    {"hidden_block_count_y", HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_Y},
    {"hidden_block_count_z", HL_KERNEL_VALUE_HIDDEN_BLOCK_COUNT_Z},
    {"hidden_group_size_x", HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_X},
    {"hidden_group_size_y", HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_Y},
    {"hidden_group_size_z", HL_KERNEL_VALUE_HIDDEN_GROUP_SIZE_Z},
    {"hidden_remainder_x", HL_KERNEL_VALUE_HIDDEN_REMAINDER_X},
    {"hidden_remainder_y", HL_KERNEL_VALUE_HIDDEN_REMAINDER_Y},
    {"hidden_remainder_z", HL_KERNEL_VALUE_HIDDEN_REMAINDER_Z},
    {"hidden_grid_dims", HL_KERNEL_VALUE_HIDDEN_GRID_DIMS},
    {"hidden_dynamic_lds_size", HL_KERNEL_VALUE_HIDDEN_DYNAMIC_LDS_SIZE},
};

const char* hl_kernel_value_kind_name(hl_kernel_value_kind_t kind) {
  for (size_t i = 0; i < sizeof(kValueKinds) / sizeof(kValueKinds[0]); ++i) {
    if (kValueKinds[i].kind == kind) return kValueKinds[i].name;
  }
  return kind == HL_KERNEL_VALUE_HIDDEN_OTHER ? "hidden (other)"
                                              : "unsupported kind";
}

static bool hl_str_is(const msgpack_object* o, const char* s) {
  size_t n = strlen(s);
  return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
         memcmp(o->via.str.ptr, s, n) == 0;
}

// The value of key |key| in map |map|, or NULL.
static const msgpack_object* hl_map_get(const msgpack_object* map,
                                        const char* key) {
  if (map->type != MSGPACK_OBJECT_MAP) return NULL;
  for (uint32_t i = 0; i < map->via.map.size; ++i) {
    if (hl_str_is(&map->via.map.ptr[i].key, key)) {
      return &map->via.map.ptr[i].val;
    }
  }
  return NULL;
}

static bool hl_get_u32(const msgpack_object* map, const char* key,
                       uint32_t* out) {
  const msgpack_object* v = hl_map_get(map, key);
  if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
      v->via.u64 > UINT32_MAX) {
    return false;
  }
  *out = (uint32_t)v->via.u64;
  return true;
}

static bool hl_get_str(const msgpack_object* map, const char* key, char* out,
                       size_t capacity) {
  const msgpack_object* v = hl_map_get(map, key);
  if (!v || v->type != MSGPACK_OBJECT_STR || v->via.str.size >= capacity) {
    return false;
  }
  memcpy(out, v->via.str.ptr, v->via.str.size);
  out[v->via.str.size] = '\0';
  return true;
}

static hl_kernel_value_kind_t hl_value_kind(const char* name) {
  for (size_t i = 0; i < sizeof(kValueKinds) / sizeof(kValueKinds[0]); ++i) {
    if (strcmp(kValueKinds[i].name, name) == 0) return kValueKinds[i].kind;
  }
  return strncmp(name, "hidden_", 7) == 0 ? HL_KERNEL_VALUE_HIDDEN_OTHER
                                          : HL_KERNEL_VALUE_UNKNOWN;
}

static hl_status_t hl_parse_arg(const char* kernel, uint32_t index,
                                const msgpack_object* m,
                                hl_kernel_arg_desc_t* out) {
  memset(out, 0, sizeof(*out));
  char kind[48];
  hl_get_str(m, ".name", out->name, sizeof(out->name));
  if (!hl_get_u32(m, ".offset", &out->offset) ||
      !hl_get_u32(m, ".size", &out->size) ||
      !hl_get_str(m, ".value_kind", kind, sizeof(kind))) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "AMDGPU metadata: kernel '%s' argument %u lacks "
                          ".offset, .size or .value_kind",
                          kernel, index);
  }
  out->kind = hl_value_kind(kind);
  if (!out->name[0]) {  // Clang names HIP arguments only with -g.
    snprintf(out->name, sizeof(out->name), "unnamed %s", kind);
  }
  const msgpack_object* c = hl_map_get(m, ".is_const");
  out->is_const = c && c->type == MSGPACK_OBJECT_BOOLEAN && c->via.boolean;
  return NULL;
}

static hl_status_t hl_parse_kernel(const msgpack_object* m,
                                   hl_kernel_signature_t* out) {
  memset(out, 0, sizeof(*out));
  if (!hl_get_str(m, ".name", out->name, sizeof(out->name))) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "AMDGPU metadata: a kernel has no .name (or one "
                          "longer than %d bytes)",
                          HL_KERNEL_NAME_MAX - 1);
  }
  if (!hl_get_u32(m, ".kernarg_segment_size", &out->kernarg_size) ||
      !hl_get_u32(m, ".kernarg_segment_align", &out->kernarg_align)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "AMDGPU metadata: kernel '%s' lacks "
                          ".kernarg_segment_size or .kernarg_segment_align",
                          out->name);
  }
  const msgpack_object* args = hl_map_get(m, ".args");
  if (args && args->type != MSGPACK_OBJECT_ARRAY) args = NULL;
  uint32_t count = args ? args->via.array.size : 0;
  if (count > HL_KERNEL_SIGNATURE_MAX_ARGS) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "AMDGPU metadata: kernel '%s' has %u arguments; at "
                          "most %d are supported",
                          out->name, count, HL_KERNEL_SIGNATURE_MAX_ARGS);
  }
  out->explicit_count = count;
  for (uint32_t i = 0; i < count; ++i) {
    hl_kernel_arg_desc_t* a = &out->args[i];
    HL_RETURN_IF_ERROR_PLAIN(
        hl_parse_arg(out->name, i, &args->via.array.ptr[i], a));
    if ((uint64_t)a->offset + a->size > out->kernarg_size) {
      return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                            "AMDGPU metadata: kernel '%s' argument %u (%s) at "
                            "[%u, +%u) exceeds the %u-byte kernarg segment",
                            out->name, i, a->name, a->offset, a->size,
                            out->kernarg_size);
    }
    if (a->kind >= HL_KERNEL_VALUE_HIDDEN_FIRST &&
        out->explicit_count == count) {
      out->explicit_count = i;
    }
  }
  out->arg_count = count;
  return NULL;
}

static hl_status_t hl_parse_root(const msgpack_object* root,
                                 hl_code_object_metadata_t* out) {
  if (root->type != MSGPACK_OBJECT_MAP) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "AMDGPU metadata is not a msgpack map");
  }
  char target[HL_TARGET_ID_MAX + 32] = "";
  if (hl_get_str(root, "amdhsa.target", target, sizeof(target))) {
    // "amdgcn-amd-amdhsa--gfx90a:xnack-": the target id follows the triple.
    if (!hl_code_object_bundle_target(target, out->target,
                                      sizeof(out->target))) {
      snprintf(out->target, sizeof(out->target), "%s", target);
    }
  }
  const msgpack_object* kernels = hl_map_get(root, "amdhsa.kernels");
  if (!kernels || kernels->type != MSGPACK_OBJECT_ARRAY) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "AMDGPU metadata has no amdhsa.kernels array");
  }
  uint32_t count = kernels->via.array.size;
  out->kernels = calloc(count ? count : 1, sizeof(*out->kernels));
  if (!out->kernels) {
    return HL_MAKE_STATUS(HL_STATUS_RESOURCE_EXHAUSTED, "%u kernel signatures",
                          count);
  }
  for (uint32_t i = 0; i < count; ++i) {
    HL_RETURN_IF_ERROR_PLAIN(
        hl_parse_kernel(&kernels->via.array.ptr[i], &out->kernels[i]));
    out->kernel_count = i + 1;
  }
  return NULL;
}

// Reads a big-endian unsigned of |n| bytes at |p|.
static uint64_t hl_read_be(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// The header of the msgpack object at |p| (|left| bytes): its header size,
// the payload bytes that follow it, and the objects it contains (array
// elements, map keys and values). False for the never-used byte 0xc1 or a
// header cut short.
static bool hl_msgpack_header(const unsigned char* p, size_t left,
                              size_t* header, uint64_t* payload,
                              uint64_t* children) {
  static const unsigned char kFixed[32] = {
      // 0xc0..0xdf: payload bytes after the type byte (0xff: special).
      0, 0xff, 0,  0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 4,
      8, 1,    2,  4,    8,    1,    2,    4,    8,    2,    3,
      5, 9,    17, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  unsigned char t = p[0];
  *header = 1;
  *payload = 0;
  *children = 0;
  if (t <= 0x7f || t >= 0xe0) return true;
  if (t <= 0x8f) return (*children = 2u * (t & 0x0f)), true;
  if (t <= 0x9f) return (*children = t & 0x0f), true;
  if (t <= 0xbf) return (*payload = t & 0x1f), true;
  if (kFixed[t - 0xc0] != 0xff) return (*payload = kFixed[t - 0xc0]), true;
  // Lengths: bin 8/16/32, ext 8/16/32 (plus a type byte), str 8/16/32,
  // array 16/32, map 16/32.
  static const struct {
    unsigned char type, width, extra, per;
  } kSized[] = {{0xc4, 1, 0, 0}, {0xc5, 2, 0, 0}, {0xc6, 4, 0, 0},
                {0xc7, 1, 1, 0}, {0xc8, 2, 1, 0}, {0xc9, 4, 1, 0},
                {0xd9, 1, 0, 0}, {0xda, 2, 0, 0}, {0xdb, 4, 0, 0},
                {0xdc, 2, 0, 1}, {0xdd, 4, 0, 1}, {0xde, 2, 0, 2},
                {0xdf, 4, 0, 2}};
  for (size_t i = 0; i < sizeof(kSized) / sizeof(kSized[0]); ++i) {
    if (kSized[i].type != t) continue;
    if (left < 1u + kSized[i].width) return false;
    uint64_t n = hl_read_be(p + 1, kSized[i].width);
    *header = 1u + kSized[i].width;
    if (kSized[i].per) {
      *children = n * kSized[i].per;
    } else {
      *payload = n + kSized[i].extra;
    }
    return true;
  }
  return false;  // 0xc1.
}

// Checks that the msgpack object at |data| fits |size| bytes: every
// container claims no more objects than there are bytes left to hold them
// (each takes at least one), so msgpack-c, which allocates a container by
// its claim, allocates in proportion to |size|.
static bool hl_msgpack_bounded(const unsigned char* data, size_t size) {
  size_t at = 0;
  uint64_t pending = 1;  // Objects still to read.
  while (pending > 0) {
    if (at >= size) return false;
    size_t header = 0;
    uint64_t payload = 0, children = 0;
    if (!hl_msgpack_header(data + at, size - at, &header, &payload,
                           &children)) {
      return false;
    }
    --pending;
    at += header;
    if (payload > size - at) return false;
    at += (size_t)payload;
    if (children > size - at || pending + children > size - at) return false;
    pending += children;
  }
  return true;
}

hl_status_t hl_code_object_metadata_parse(
    const void* desc, size_t size, hl_code_object_metadata_t* out_metadata) {
  memset(out_metadata, 0, sizeof(*out_metadata));
  if (!desc || !hl_msgpack_bounded(desc, size)) {
    return HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                          "AMDGPU metadata: the %zu-byte note is not one "
                          "msgpack object (cut short, or a container claims "
                          "more elements than the bytes left)",
                          size);
  }
  msgpack_unpacked unpacked;
  msgpack_unpacked_init(&unpacked);
  size_t offset = 0;
  msgpack_unpack_return ret =
      msgpack_unpack_next(&unpacked, desc, size, &offset);
  hl_status_t st = NULL;
  if (ret != MSGPACK_UNPACK_SUCCESS) {
    st = HL_MAKE_STATUS(HL_STATUS_INVALID_ARGUMENT,
                        "AMDGPU metadata: the %zu-byte note is not msgpack "
                        "(msgpack_unpack_next returned %d)",
                        size, (int)ret);
  } else {
    st = hl_parse_root(&unpacked.data, out_metadata);
  }
  msgpack_unpacked_destroy(&unpacked);
  if (st) hl_code_object_metadata_deinitialize(out_metadata);
  return st;
}

hl_status_t hl_code_object_read_metadata(
    const void* elf, size_t size, hl_code_object_metadata_t* out_metadata) {
  memset(out_metadata, 0, sizeof(*out_metadata));
  const void* desc = NULL;
  size_t desc_size = 0;
  HL_RETURN_IF_ERROR_PLAIN(
      hl_code_object_metadata_note(elf, size, &desc, &desc_size));
  return hl_code_object_metadata_parse(desc, desc_size, out_metadata);
}

void hl_code_object_metadata_deinitialize(hl_code_object_metadata_t* metadata) {
  free(metadata->kernels);
  memset(metadata, 0, sizeof(*metadata));
}
