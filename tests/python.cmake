# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Python binding tests (label `python`): runtime/bindings/python/tests, run
# with the standard library's unittest over libhipline.so (hipline_shared).
#
# ASan build: the interpreter is not instrumented, so libasan must be loaded
# first (LD_PRELOAD of the compiler's libasan.so). Leak detection is off for
# these tests only: the interpreter's own allocations, alive at exit, would
# be reported; hipline's handles are checked by the tests themselves (live
# device count back to its baseline, no pending callbacks).
#
# TSan build: libtsan is preloaded the same way. Not every interpreter
# survives that (pyenv's 3.11 segfaults at start; Debian's /usr/bin/python3
# works), so the first one that runs `pass` under it is used, and the tests
# are left out with a message when none does. tsan-dlopen.supp suppresses
# one report TSan makes only for dlopen'ed libraries (glibc's dynamic TLS
# hand-off; the file says why). The TSan stage of
# tools/test.sh runs the `concurrency` label (python.api, python.asyncio and
# python.hostile: lifecycle races, closed handles, user-failed fences,
# integer ranges, fork, exit; python.executable*: user kernels on the
# streams, their results freed in queue order) under its `setarch -R` prefix.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND OR NOT TARGET hipline_shared)
  return()
endif()
set(hl_python ${Python3_EXECUTABLE})
if(HIPLINE_SANITIZER STREQUAL "thread")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libtsan.so
                  OUTPUT_VARIABLE hl_libtsan OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_program(HL_SETARCH setarch)
  set(hl_probe_prefix "")
  if(HL_SETARCH)
    set(hl_probe_prefix ${HL_SETARCH} ${CMAKE_SYSTEM_PROCESSOR} -R)
  endif()
  set(hl_python "")
  foreach(candidate ${Python3_EXECUTABLE} /usr/bin/python3)
    if(NOT hl_python AND EXISTS ${candidate})
      execute_process(
        COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=${hl_libtsan}
                ${hl_probe_prefix} ${candidate} -c pass
        RESULT_VARIABLE hl_probe_rc OUTPUT_QUIET ERROR_QUIET)
      if(hl_probe_rc EQUAL 0)
        set(hl_python ${candidate})
      endif()
    endif()
  endforeach()
  if(NOT hl_python)
    message(STATUS "hipline: no Python interpreter runs with libtsan "
                   "preloaded; the Python tests are left out of the TSan build")
    return()
  endif()
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
elseif(HIPLINE_SANITIZER STREQUAL "thread")
  # The suppression covers glibc's dynamic-TLS hand-off only (read the file).
  list(APPEND hl_py_env "LD_PRELOAD=${hl_libtsan}"
       "TSAN_OPTIONS=second_deadlock_stack=1:suppressions=${CMAKE_CURRENT_SOURCE_DIR}/tsan-dlopen.supp")
endif()

# The layout of the C structs the binding mirrors (test_abi.py).
add_executable(python_abi_layout ${CMAKE_CURRENT_SOURCE_DIR}/python_abi_layout.c)
target_link_libraries(python_abi_layout PRIVATE hipline::hipline hipline_warnings)
list(APPEND hl_py_env "HL_ABI_LAYOUT=$<TARGET_FILE:python_abi_layout>")

# The serving example needs aiohttp (Debian: python3-aiohttp, which
# tools/test.sh installs for /usr/bin/python3): its tests run with the first
# interpreter that imports it (and fail naming the package when none does).
set(hl_python_http ${hl_python})
foreach(candidate ${hl_python} /usr/bin/python3)
  if(hl_python_http STREQUAL hl_python AND EXISTS ${candidate})
    execute_process(COMMAND ${candidate} -c "import aiohttp"
                    RESULT_VARIABLE hl_aiohttp_rc OUTPUT_QUIET ERROR_QUIET)
    if(hl_aiohttp_rc EQUAL 0)
      set(hl_python_http ${candidate})
      break()
    endif()
  endif()
endforeach()

foreach(part abi api asyncio assume_no_alias hostile serve serve_http
             public_api trace)
  set(hl_interpreter ${hl_python})
  if(part MATCHES "^serve")
    set(hl_interpreter ${hl_python_http})
  endif()
  add_test(NAME python.${part}
    COMMAND ${hl_interpreter} -m unittest -v test_${part}
    WORKING_DIRECTORY ${hl_py_dir}/tests)
  set(hl_labels python)
  if(part MATCHES "^(api|asyncio|hostile)$")
    list(APPEND hl_labels concurrency)  # Callbacks across threads: TSan.
  endif()
  set_tests_properties(python.${part} PROPERTIES
    LABELS "${hl_labels}" TIMEOUT 600 ENVIRONMENT "${hl_py_env}")
endforeach()
set_tests_properties(python.serve python.serve_http PROPERTIES RUN_SERIAL ON)

# Several devices (test_multi_device.py, labels python and multi-device):
# 4 host devices with two pairs unreachable (peer and staged copies in one
# run; again with random stream delays, so copies and frees land late), 4
# with none reachable (everything staged), and 2 devices of the hip test
# runtime with and without peer access. HL_TEST_DEVICES and
# HL_TEST_UNREACHABLE tell the test what the backend was told.
set(hl_py_md_hiprt_env
  "HIPLINE_TEST_BACKEND=hip"
  "LD_LIBRARY_PATH=${PROJECT_BINARY_DIR}/hip_test_runtime/rocm-6.2"
  "HL_HIP_TEST_RUNTIME_DEVICES=2" "HL_TEST_DEVICES=2")
foreach(variant host host_delays host_staged hiprt hiprt_staged)
  if(variant MATCHES "^hiprt" AND NOT TARGET hl_hip_test_runtime_6_2)
    continue()
  endif()
  add_test(NAME python.multi_device_${variant}
    COMMAND ${hl_python} -m unittest -v test_multi_device
    WORKING_DIRECTORY ${hl_py_dir}/tests)
  set(hl_labels python multi-device concurrency)
  if(variant MATCHES "^hiprt")
    list(APPEND hl_labels hip)
  endif()
  set_tests_properties(python.multi_device_${variant} PROPERTIES
    LABELS "${hl_labels}" TIMEOUT 300)
endforeach()
set_tests_properties(python.multi_device_host PROPERTIES ENVIRONMENT
  "${hl_py_env};HIPLINE_HOST_DEVICES=4;HL_TEST_DEVICES=4;HIPLINE_HOST_PEERS=0-3=off,1-3=off;HL_TEST_UNREACHABLE=0-3,1-3")
set_tests_properties(python.multi_device_host_delays PROPERTIES ENVIRONMENT
  "${hl_py_env};HIPLINE_HOST_DEVICES=4;HL_TEST_DEVICES=4;HIPLINE_HOST_PEERS=0-3=off,1-3=off;HL_TEST_UNREACHABLE=0-3,1-3;HIPLINE_FAULTS=stream_delay_us=300,seed=7")
set_tests_properties(python.multi_device_host_staged PROPERTIES ENVIRONMENT
  "${hl_py_env};HIPLINE_HOST_DEVICES=4;HL_TEST_DEVICES=4;HIPLINE_HOST_PEERS=all=off;HL_TEST_UNREACHABLE=all")
if(TARGET hl_hip_test_runtime_6_2)
  add_dependencies(python_abi_layout hl_hip_test_runtime_6_2)
  set_tests_properties(python.multi_device_hiprt PROPERTIES ENVIRONMENT
    "${hl_py_env};${hl_py_md_hiprt_env}")
  set_tests_properties(python.multi_device_hiprt_staged PROPERTIES
    ENVIRONMENT "${hl_py_env};${hl_py_md_hiprt_env};HL_HIP_TEST_RUNTIME_PEERS=none;HL_TEST_UNREACHABLE=all")
endif()

# The type hints satisfy mypy --strict (test_typecheck.py): with the first
# interpreter that imports mypy (Debian: mypy, for /usr/bin/python3, which
# tools/test.sh installs); it fails naming the package when none does.
set(hl_python_mypy ${hl_python})
foreach(candidate ${hl_python} /usr/bin/python3)
  if(EXISTS ${candidate})
    execute_process(COMMAND ${candidate} -c "import mypy"
                    RESULT_VARIABLE hl_mypy_rc OUTPUT_QUIET ERROR_QUIET)
    if(hl_mypy_rc EQUAL 0)
      set(hl_python_mypy ${candidate})
      break()
    endif()
  endif()
endforeach()
add_test(NAME python.typecheck
  COMMAND ${hl_python_mypy} -m unittest -v test_typecheck
  WORKING_DIRECTORY ${hl_py_dir}/tests)
set_tests_properties(python.typecheck PROPERTIES
  LABELS python TIMEOUT 300 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")

# User executables (test_executable.py) with the user kernel set that
# tests/executable.cmake builds: on the host backend, and on the hip test
# runtime running the kernels' host twin for the GPU objects.
if(TARGET hl_user_kernels)
  add_dependencies(python_abi_layout hl_user_kernels hl_hip_test_runtime_6_2)
  set(hl_py_uk_env ${hl_py_env}
    "HL_USER_KERNELS_DIR=${hl_uk_dir}"
    "HL_USER_KERNEL_TARGETS=${HIPLINE_USER_KERNEL_TARGETS}"
    "HL_USER_KERNELS_HOST=${hl_uk_dir}/user_kernels_host.so"
    "HL_USER_KERNELS_BUNDLE=${hl_uk_bundle}")
  add_test(NAME python.executable
    COMMAND ${hl_python} -m unittest -v test_executable
    WORKING_DIRECTORY ${hl_py_dir}/tests)
  set_tests_properties(python.executable PROPERTIES
    LABELS "python;executable;concurrency" TIMEOUT 300 ENVIRONMENT "${hl_py_uk_env}")
  add_test(NAME python.executable_hiprt
    COMMAND ${hl_python} -m unittest -v test_executable
    WORKING_DIRECTORY ${hl_py_dir}/tests)
  set_tests_properties(python.executable_hiprt PROPERTIES
    LABELS "python;executable;hip;concurrency" TIMEOUT 300
    ENVIRONMENT "${hl_py_uk_env};HIPLINE_TEST_BACKEND=hip;LD_LIBRARY_PATH=${PROJECT_BINARY_DIR}/hip_test_runtime/rocm-6.2;HL_HIP_TEST_RUNTIME_TWINS=${hl_uk_dir}/user_kernels_host.so")
endif()

# Installing (label `package`, tests/package/python_install.cmake):
#   python.install  `cmake --install` into a fresh virtual environment: the
#     package lands where its interpreter looks, and the import line the
#     install prints runs as printed (no PYTHONPATH, no LIBHIPLINE);
#   python.pip      `pip install --no-build-isolation` of
#     runtime/bindings/python into a fresh virtual environment, with this
#     build's libhipline.so ($LIBHIPLINE), then a device from the venv.
# The pip test needs setuptools and wheel (Debian: python3-setuptools,
# python3-wheel, python3-venv, python3-pip): the first interpreter that
# imports them is used.
if(HIPLINE_INSTALL AND NOT HIPLINE_SANITIZER STREQUAL "thread")
  # Only the Python processes get the sanitizer's runtime (not cmake).
  set(hl_py_installed_env "PYTHONDONTWRITEBYTECODE=1")
  if(HIPLINE_SANITIZER STREQUAL "address")
    list(APPEND hl_py_installed_env "LD_PRELOAD=${hl_libasan}"
         "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
  endif()
  string(REPLACE ";" "|" hl_py_installed_env "${hl_py_installed_env}")
  add_test(NAME python.install
    COMMAND ${CMAKE_COMMAND} -DHL_MODE=install -DHL_PYTHON=${hl_python}
      -DHL_BUILD_DIR=${PROJECT_BINARY_DIR} -DHL_CONFIG=$<CONFIG>
      -DHL_WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/python-install-test
      "-DHL_PY_ENV=${hl_py_installed_env}"
      -P ${CMAKE_CURRENT_SOURCE_DIR}/package/python_install.cmake)
  set(hl_pip_python "")
  foreach(candidate /usr/bin/python3 ${hl_python})
    if(NOT hl_pip_python AND EXISTS ${candidate})
      execute_process(COMMAND ${candidate} -c "import setuptools, wheel, venv, pip"
                      RESULT_VARIABLE hl_probe_rc OUTPUT_QUIET ERROR_QUIET)
      if(hl_probe_rc EQUAL 0)
        set(hl_pip_python ${candidate})
      endif()
    endif()
  endforeach()
  if(hl_pip_python)
    add_test(NAME python.pip
      COMMAND ${CMAKE_COMMAND} -DHL_MODE=pip -DHL_PYTHON=${hl_pip_python}
        -DHL_SOURCE_DIR=${PROJECT_SOURCE_DIR}
        -DHL_LIBRARY=$<TARGET_FILE:hipline_shared>
        -DHL_WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/python-pip-test
        "-DHL_PY_ENV=${hl_py_installed_env}"
        -P ${CMAKE_CURRENT_SOURCE_DIR}/package/python_install.cmake)
    set_tests_properties(python.pip PROPERTIES
      LABELS "python;package" TIMEOUT 300 RUN_SERIAL ON)
  else()
    message(STATUS "hipline: no Python with setuptools, wheel, venv and pip "
                   "(Debian: python3-setuptools python3-wheel python3-venv "
                   "python3-pip); python.pip is left out")
  endif()
  set_tests_properties(python.install PROPERTIES
    LABELS "python;package" TIMEOUT 300 RUN_SERIAL ON)
endif()
