# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Installs the hipline Python package (run by `cmake --install` through
# install(SCRIPT), cmake/install.cmake). The package goes where the target
# interpreter looks under the install prefix:
#   - PREFIX/bin/python when PREFIX is a virtual environment (pyvenv.cfg),
#     else the interpreter the build was configured with (HIPLINE_PYTHON);
#   - the directory it is asked for (cmake/python_site.py): the site or
#     dist-packages directory it searches under PREFIX (Debian's python3
#     with /usr/local: lib/python3.X/dist-packages), else its posix_prefix
#     scheme's purelib;
#   - HIPLINE_INSTALL_PYTHONDIR, when set, wins (relative to PREFIX).
# It prints the line that imports the package; PYTHONPATH is part of it only
# when the interpreter does not look under PREFIX.
set(hl_prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(hl_python "@HIPLINE_PYTHON@")
if(EXISTS "${CMAKE_INSTALL_PREFIX}/pyvenv.cfg" AND
   EXISTS "${CMAKE_INSTALL_PREFIX}/bin/python")
  set(hl_python "${CMAKE_INSTALL_PREFIX}/bin/python")
endif()
set(hl_pydir "@HIPLINE_INSTALL_PYTHONDIR@")
set(hl_where "off-path")
if(hl_pydir STREQUAL "")
  if(NOT hl_python)
    message(FATAL_ERROR "hipline: no Python interpreter to install the "
                        "package for (configure with -DHIPLINE_PYTHON=...)")
  endif()
  execute_process(
    COMMAND "${hl_python}" "@PROJECT_SOURCE_DIR@/cmake/python_site.py"
            "${CMAKE_INSTALL_PREFIX}"
    RESULT_VARIABLE hl_rc OUTPUT_VARIABLE hl_out ERROR_VARIABLE hl_err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT hl_rc EQUAL 0)
    message(FATAL_ERROR "hipline: asking ${hl_python} for its package "
                        "directory failed: ${hl_err}")
  endif()
  string(REPLACE "\n" ";" hl_out "${hl_out}")
  list(GET hl_out 0 hl_pydir)
  list(GET hl_out 1 hl_where)
endif()

set(hl_pkg "${hl_prefix}/${hl_pydir}/hipline")
file(GLOB hl_py_files "@PROJECT_SOURCE_DIR@/runtime/bindings/python/hipline/*.py"
     "@PROJECT_SOURCE_DIR@/runtime/bindings/python/hipline/py.typed")
file(INSTALL ${hl_py_files} DESTINATION "${hl_pkg}")
file(RELATIVE_PATH hl_to_lib "/hl-prefix/${hl_pydir}/hipline"
     "/hl-prefix/@CMAKE_INSTALL_LIBDIR@")
file(WRITE "@PROJECT_BINARY_DIR@/python-install/_install_paths.py"
     "# Written by cmake --install: where libhipline.so is, relative to this package.\n"
     "LIBRARY_DIR = \"${hl_to_lib}\"\n"
     "LIBRARY_NAME = \"libhipline.so.@PROJECT_VERSION_MAJOR@\"\n")
file(INSTALL "@PROJECT_BINARY_DIR@/python-install/_install_paths.py"
     DESTINATION "${hl_pkg}")

set(hl_line "${hl_python} -c \"import hipline\"")
if(NOT hl_where STREQUAL "on-path")
  set(hl_line "PYTHONPATH=${CMAKE_INSTALL_PREFIX}/${hl_pydir} ${hl_line}")
endif()
message(STATUS "hipline: Python package in ${CMAKE_INSTALL_PREFIX}/${hl_pydir}; "
               "import it with:\n  ${hl_line}")
