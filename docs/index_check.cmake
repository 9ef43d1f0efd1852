# cmake -DROOT=<repository> -P docs/index_check.cmake
# Fails unless README.md links every page of docs/ (as "(docs/NAME.md)"), so
# a new page cannot go unlisted in the README's index.
file(GLOB pages RELATIVE "${ROOT}" "${ROOT}/docs/*.md")
file(READ "${ROOT}/README.md" readme)
set(missing "")
foreach(page IN LISTS pages)
  string(FIND "${readme}" "(${page})" at)
  if(at EQUAL -1)
    list(APPEND missing ${page})
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "README.md does not link ${missing}; add each to its "
                      "Documentation table")
endif()
