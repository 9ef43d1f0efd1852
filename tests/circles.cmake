# No circle of files in runtime/ but the two its internal headers justify:
# the timeline layer's (timeline_internal.h) and memory's dealloca.c <->
# fallback.c (memory_internal.h). tools/check_circles.py.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME check_circles
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/check_circles.py
                   ${PROJECT_SOURCE_DIR}/runtime
                   --allow "memory/dealloca.c memory/fallback.c"
                   --allow-folder timeline/)
  set_tests_properties(check_circles PROPERTIES LABELS "tools" TIMEOUT 60)
endif()
