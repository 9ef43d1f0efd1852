# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# cmake -DREADME=... -DEXAMPLE=... -P readme_check.cmake
# Fails unless README contains EXAMPLE verbatim, less its leading comment
# lines ("// " in C, "# " in Python): the README's programs are the examples
# CI runs, never a copy that drifts.
file(READ "${EXAMPLE}" body)
string(REGEX REPLACE "^((//|#)( [^\n]*)?\n)+" "" body "${body}")
file(READ "${README}" readme)
string(FIND "${readme}" "${body}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README} does not quote ${EXAMPLE} (less its header "
                      "comment) verbatim; copy the example into it")
endif()
