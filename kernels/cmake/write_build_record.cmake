# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# cmake -P script: writes the build record of the GPU code objects.
#   -DOUTPUT=<file> -DTARGETS=<a|b|...> -DFILES=<a.co|b.co|...>
#   -DCOMPILERS=<clang|hipcc|...> -DSKIPPED=<t=reason|...> (may be empty)
#   -DCLANG=<clang command line> -DHIPCC=<hipcc command line> (may be empty)
# One line per code object: "built<TAB>target<TAB>bytes<TAB>path<TAB>compiler",
# one line per target no compiler could build: "skipped<TAB>target<TAB>reason".
# Each requested distinct target appears on exactly one line.
string(REPLACE "|" ";" targets "${TARGETS}")
string(REPLACE "|" ";" files "${FILES}")
string(REPLACE "|" ";" compilers "${COMPILERS}")
string(REPLACE "|" ";" skipped "${SKIPPED}")
set(text "# hipline GPU code objects; written by kernels/cmake/write_build_record.cmake\n")
string(APPEND text "# clang: ${CLANG}\n")
string(APPEND text "# hipcc: ${HIPCC}\n")
foreach(target file compiler IN ZIP_LISTS targets files compilers)
  file(SIZE "${file}" size)
  string(APPEND text "built\t${target}\t${size}\t${file}\t${compiler}\n")
endforeach()
foreach(entry ${skipped})
  string(FIND "${entry}" "=" eq)
  string(SUBSTRING "${entry}" 0 ${eq} target)
  math(EXPR rest "${eq} + 1")
  string(SUBSTRING "${entry}" ${rest} -1 reason)
  string(APPEND text "skipped\t${target}\t${reason}\n")
endforeach()
file(WRITE "${OUTPUT}" "${text}")
