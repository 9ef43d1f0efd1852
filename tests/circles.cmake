# No circle of files in runtime/ but the two its internal headers justify
# (timeline_internal.h, memory_internal.h): tools/check_circles.py.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME check_circles
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/check_circles.py
                   ${PROJECT_SOURCE_DIR}/runtime
                   --allow "memory/dealloca.c memory/fallback.c"
                   --allow "timeline/completer.c timeline/device.c timeline/fence.c timeline/queue.c timeline/scheduler.c timeline/semaphore.c timeline/submit.c timeline/timeline_internal.h")
  set_tests_properties(check_circles PROPERTIES LABELS "tools" TIMEOUT 60)
endif()
