# cmake -P script: writes the build record of the GPU code objects.
#   -DOUTPUT=<file> -DTARGETS=<a|b|...> -DFILES=<a.co|b.co|...>
#   -DSKIPPED=<t=reason|...> (may be empty) -DHIPCC=<hipcc command line>
# One line per code object: "built<TAB>target<TAB>bytes<TAB>path", one line
# per target hipcc could not build: "skipped<TAB>target<TAB>reason". Each
# requested distinct target appears on exactly one line.
string(REPLACE "|" ";" targets "${TARGETS}")
string(REPLACE "|" ";" files "${FILES}")
string(REPLACE "|" ";" skipped "${SKIPPED}")
set(text "# hipline GPU code objects; written by kernels/cmake/write_build_record.cmake\n")
string(APPEND text "# hipcc: ${HIPCC}\n")
foreach(target file IN ZIP_LISTS targets files)
  file(SIZE "${file}" size)
  string(APPEND text "built\t${target}\t${size}\t${file}\n")
endforeach()
foreach(entry ${skipped})
  string(FIND "${entry}" "=" eq)
  string(SUBSTRING "${entry}" 0 ${eq} target)
  math(EXPR rest "${eq} + 1")
  string(SUBSTRING "${entry}" ${rest} -1 reason)
  string(APPEND text "skipped\t${target}\t${reason}\n")
endforeach()
file(WRITE "${OUTPUT}" "${text}")
