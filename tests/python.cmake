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

# The installed package finds the installed library by itself
# (_install_paths.py), without LIBHIPLINE.
if(HIPLINE_INSTALL)
  include(GNUInstallDirs)
  # Same default as cmake/install.cmake (included after the tests).
  set(HIPLINE_INSTALL_PYTHONDIR "${CMAKE_INSTALL_LIBDIR}/python3/dist-packages"
      CACHE STRING "Where the hipline Python package is installed, relative to the prefix")
  set(hl_py_prefix ${CMAKE_CURRENT_BINARY_DIR}/python-install-test)
  add_test(NAME python.install
    COMMAND ${CMAKE_COMMAND} --install ${PROJECT_BINARY_DIR} --prefix ${hl_py_prefix}
            --config $<CONFIG>)
  add_test(NAME python.installed
    COMMAND ${Python3_EXECUTABLE} -c
      "import os,sys; os.environ.pop('LIBHIPLINE',None); sys.path.insert(0,sys.argv[1]); import hipline; assert hipline.library_path.startswith(sys.argv[2]), hipline.library_path; d=hipline.Device('host'); q=d.create_queue(); b=q.alloca(64); q.fill(b,7).wait(30); print('installed ok', hipline.library_path)"
      ${hl_py_prefix}/${HIPLINE_INSTALL_PYTHONDIR} ${hl_py_prefix}
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(python.install PROPERTIES
    LABELS "python;package" TIMEOUT 300 FIXTURES_SETUP hl_python_installed)
  set(hl_py_installed_env "PYTHONDONTWRITEBYTECODE=1")
  if(HIPLINE_SANITIZER STREQUAL "address")
    list(APPEND hl_py_installed_env "LD_PRELOAD=${hl_libasan}"
         "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
  endif()
  set_tests_properties(python.installed PROPERTIES
    LABELS "python;package" TIMEOUT 300 FIXTURES_REQUIRED hl_python_installed
    ENVIRONMENT "${hl_py_installed_env}")
endif()
