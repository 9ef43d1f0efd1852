# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Helpers for GPU target ids (AMD "target id" syntax: processor followed by
# optional colon-separated features with + or -, e.g. gfx90a:sramecc+:xnack-).

# hl_canonical_target_id(<out> <target>): the processor followed by its
# features sorted by name, so gfx90a:xnack-:sramecc+ and gfx90a:sramecc+:xnack-
# name the same target. Features keep their sign: gfx90a:xnack- and
# gfx90a:xnack+ stay different targets.
function(hl_canonical_target_id out target)
  string(STRIP "${target}" target)
  string(REPLACE ":" ";" parts "${target}")
  list(POP_FRONT parts processor)
  list(SORT parts)
  set(result "${processor}")
  foreach(feature ${parts})
    string(APPEND result ":${feature}")
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# hl_distinct_targets(<out> <targets...>): the canonical ids of <targets>,
# each once, in the order of first appearance; empty entries are dropped.
function(hl_distinct_targets out)
  set(result "")
  foreach(target ${ARGN})
    if(target STREQUAL "")
      continue()
    endif()
    hl_canonical_target_id(canonical "${target}")
    list(APPEND result "${canonical}")
  endforeach()
  list(REMOVE_DUPLICATES result)
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# hl_target_file_stem(<out> <target>): a file-name and C-identifier safe stem
# that keeps + and - apart (gfx90a:xnack+ -> gfx90a_xnack_on).
function(hl_target_file_stem out target)
  string(REPLACE "+" "_on" stem "${target}")
  string(REPLACE "-" "_off" stem "${stem}")
  string(MAKE_C_IDENTIFIER "${stem}" stem)
  set(${out} "${stem}" PARENT_SCOPE)
endfunction()
