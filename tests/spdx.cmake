# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Every source file carries the licence's SPDX line (LICENSE at the root):
# tools/check_spdx.py lists those without one, and --fix adds it.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME check_spdx
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/check_spdx.py
                   ${PROJECT_SOURCE_DIR})
  set_tests_properties(check_spdx PROPERTIES LABELS "tools" TIMEOUT 60)
endif()
