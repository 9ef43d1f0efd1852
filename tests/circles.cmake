# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# No circle of files in runtime/ but the timeline layer's, which
# timeline_internal.h justifies. tools/check_circles.py.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME check_circles
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/check_circles.py
                   ${PROJECT_SOURCE_DIR}/runtime
                   --allow-folder timeline/)
  set_tests_properties(check_circles PROPERTIES LABELS "tools" TIMEOUT 60)
endif()
