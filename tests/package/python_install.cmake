# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Script for the Python install tests (tests/python.cmake): cmake -P with
# -DHL_MODE=install or pip. See there for what each checks.
cmake_minimum_required(VERSION 3.20)

function(hl_py_run what)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "python: ${what} failed (exit ${rc}):\n"
                        "  command: ${ARGN}\n${out}${err}")
  endif()
  message(STATUS "python: ${what}: ok")
  set(hl_py_out "${out}" PARENT_SCOPE)
endfunction()

# Imports hipline with |python| from outside the source tree, with neither
# PYTHONPATH nor LIBHIPLINE, and uses a device; the library must come from
# under |root|.
set(hl_check [=[
import sys
import hipline
assert hipline.library_path.startswith(sys.argv[1]), hipline.library_path
with hipline.Device("host") as d, d.create_queue() as q:
    b = q.alloca(64)
    q.fill(b, 7).wait(30)
print("imported from", hipline.__file__, "with", hipline.library_path)
]=])

# The environment of the Python processes ("A=1|B=2", HL_PY_ENV): the
# sanitizer's runtime for an ASan build.
string(REPLACE "|" ";" hl_py_env "${HL_PY_ENV}")
set(py_env ${CMAKE_COMMAND} -E env ${hl_py_env})

file(REMOVE_RECURSE ${HL_WORK_DIR})
file(MAKE_DIRECTORY ${HL_WORK_DIR})
unset(ENV{PYTHONPATH})
unset(ENV{LIBHIPLINE})
set(venv ${HL_WORK_DIR}/venv)

# The installed package carries its type hints' marker (PEP 561).
function(hl_py_check_typed)
  file(GLOB typed ${venv}/lib/python*/site-packages/hipline/py.typed)
  if(NOT typed)
    message(FATAL_ERROR "python: no hipline/py.typed under ${venv}")
  endif()
endfunction()

if(HL_MODE STREQUAL "install")
  hl_py_run("create ${venv}" ${HL_PYTHON} -m venv --without-pip ${venv})
  set(config_args "")
  if(HL_CONFIG)
    set(config_args --config ${HL_CONFIG})
  endif()
  hl_py_run("cmake --install --prefix ${venv}"
    ${CMAKE_COMMAND} --install ${HL_BUILD_DIR} --prefix ${venv} ${config_args})
  if(NOT hl_py_out MATCHES "import it with:\n  ([^\n]*)")
    message(FATAL_ERROR "python: the install printed no import line:\n${hl_py_out}")
  endif()
  set(line "${CMAKE_MATCH_1}")
  if(line MATCHES "PYTHONPATH")
    message(FATAL_ERROR "python: the import line for a venv prefix needs "
                        "PYTHONPATH: ${line}")
  endif()
  hl_py_run("the printed line: ${line}" ${py_env} sh -c "${line}"
    WORKING_DIRECTORY ${HL_WORK_DIR})
  hl_py_check_typed()
  hl_py_run("use the installed package"
    ${py_env} ${venv}/bin/python -c "${hl_check}" ${venv}
    WORKING_DIRECTORY ${HL_WORK_DIR})
elseif(HL_MODE STREQUAL "pip")
  # --system-site-packages: the build backend (Debian's setuptools and
  # wheel) comes from the interpreter; no package index is asked.
  hl_py_run("create ${venv}" ${HL_PYTHON} -m venv --system-site-packages ${venv})
  set(ENV{LIBHIPLINE} ${HL_LIBRARY})
  set(ENV{PIP_NO_INDEX} 1)
  hl_py_run("pip install runtime/bindings/python"
    ${venv}/bin/python -m pip install --no-build-isolation --no-index
    --disable-pip-version-check ${HL_SOURCE_DIR}/runtime/bindings/python)
  unset(ENV{LIBHIPLINE})
  # The wheel holds this build's library, not one an earlier pip install
  # from the same source tree (another preset's) left in its build/.
  file(GLOB hl_pip_libs ${venv}/lib/python*/site-packages/hipline/libhipline.so.*)
  if(NOT hl_pip_libs)
    message(FATAL_ERROR "python: the wheel installed no libhipline.so.*")
  endif()
  foreach(lib ${hl_pip_libs})
    file(SHA256 ${lib} hl_got)
    file(SHA256 ${HL_LIBRARY} hl_want)
    if(NOT hl_got STREQUAL hl_want)
      message(FATAL_ERROR "python: the wheel's ${lib} is not ${HL_LIBRARY}")
    endif()
  endforeach()
  hl_py_check_typed()
  hl_py_run("use the pip-installed package"
    ${py_env} ${venv}/bin/python -c "${hl_check}" ${venv}
    WORKING_DIRECTORY ${HL_WORK_DIR})
  message(STATUS "python: ${hl_py_out}")
else()
  message(FATAL_ERROR "package_python.cmake: -DHL_MODE=install or pip")
endif()
