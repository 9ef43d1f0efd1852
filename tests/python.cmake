# Python binding tests (label `python`): runtime/bindings/python/tests, run
# with the standard library's unittest over libhipline.so (hipline_shared).
#
# ASan build: the interpreter is not instrumented, so libasan must be loaded
# first (LD_PRELOAD of the compiler's libasan.so). Leak detection is off for
# these tests only: the interpreter's own allocations, alive at exit, would
# be reported; hipline's handles are checked by the tests themselves (live
# device count back to its baseline, no pending callbacks). TSan build: not
# run (an uninstrumented interpreter loading a TSan library reports the
# GIL's hand-offs); the C concurrency tests cover the runtime there.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND OR NOT TARGET hipline_shared)
  return()
endif()
if(HIPLINE_SANITIZER STREQUAL "thread")
  return()
endif()

set(hl_py_dir ${PROJECT_SOURCE_DIR}/runtime/bindings/python)
set(hl_py_env
  "LIBHIPLINE=$<TARGET_FILE:hipline_shared>"
  "PYTHONPATH=${hl_py_dir}"
  "PYTHONDONTWRITEBYTECODE=1")
if(HIPLINE_SANITIZER STREQUAL "address")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
                  OUTPUT_VARIABLE hl_libasan OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND hl_py_env "LD_PRELOAD=${hl_libasan}"
       "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
endif()

foreach(part api asyncio assume_no_alias serve)
  add_test(NAME python.${part}
    COMMAND ${Python3_EXECUTABLE} -m unittest -v test_${part}
    WORKING_DIRECTORY ${hl_py_dir}/tests)
  set_tests_properties(python.${part} PROPERTIES
    LABELS python TIMEOUT 600 ENVIRONMENT "${hl_py_env}")
endforeach()
set_tests_properties(python.serve PROPERTIES RUN_SERIAL ON)
