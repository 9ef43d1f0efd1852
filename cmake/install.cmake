# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Install rules and package files, libdeflate style. Included from the
# top-level CMakeLists.txt only when HIPLINE_INSTALL is on (the default when
# hipline is the top-level project).
#
# What gets installed:
#   lib/libhipline.{a,so}                       target hipline::hipline
#   include/hipline/*.h                         the PUBLIC_HEADER set
#   lib/cmake/hipline/hiplineConfig.cmake       find_package(hipline CONFIG)
#   lib/cmake/hipline/hiplineConfigVersion.cmake  (SameMajorVersion)
#   lib/cmake/hipline/hiplineTargets*.cmake
#   lib/pkgconfig/hipline.pc                    pkg-config --cflags --libs hipline (shared)
#   lib/pkgconfig/hipline-static.pc             ... hipline-static (static)
#   bin/hipline-*                               tools, when built
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HIPLINE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/hipline" CACHE STRING
    "Where hiplineConfig.cmake is installed, relative to the prefix")
set(HIPLINE_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig" CACHE STRING
    "Where hipline.pc is installed, relative to the prefix")

# Build-only helper targets must not leak into the exported interface. A
# static library exports its private link items as $<LINK_ONLY:...>, so a
# plain `PRIVATE hipline_warnings` would make install(EXPORT) fail with
# "requires target hipline_warnings that is not in any export set". Wrap such
# INTERFACE/OBJECT items in BUILD_INTERFACE here; the proper fix is to write
# $<BUILD_INTERFACE:hipline_warnings> in runtime/CMakeLists.txt, after which
# this block does nothing.
get_target_property(hl_iface_libs hipline INTERFACE_LINK_LIBRARIES)
if(hl_iface_libs)
  set(hl_fixed_libs "")
  foreach(item IN LISTS hl_iface_libs)
    set(hl_dep "")
    if(item MATCHES "^\\$<LINK_ONLY:([A-Za-z0-9_]+)>$")
      set(hl_dep ${CMAKE_MATCH_1})
    endif()
    if(hl_dep AND TARGET ${hl_dep})
      get_target_property(hl_dep_type ${hl_dep} TYPE)
      get_target_property(hl_dep_imported ${hl_dep} IMPORTED)
      # Only code-free (INTERFACE) or absorbed (OBJECT) project targets can be
      # dropped; a real library would leave consumers with missing symbols.
      if(NOT hl_dep_imported AND hl_dep_type MATCHES "^(INTERFACE|OBJECT)_LIBRARY$")
        set(item "$<LINK_ONLY:$<BUILD_INTERFACE:${hl_dep}>>")
      endif()
    endif()
    list(APPEND hl_fixed_libs "${item}")
  endforeach()
  set_property(TARGET hipline PROPERTY INTERFACE_LINK_LIBRARIES "${hl_fixed_libs}")
endif()

install(TARGETS hipline
  EXPORT hiplineTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hipline
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT hiplineTargets
  NAMESPACE hipline::
  DESTINATION ${HIPLINE_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/hiplineConfig.cmake.in
  ${PROJECT_BINARY_DIR}/hiplineConfig.cmake
  INSTALL_DESTINATION ${HIPLINE_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/hiplineConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/hiplineConfig.cmake
  ${PROJECT_BINARY_DIR}/hiplineConfigVersion.cmake
  DESTINATION ${HIPLINE_INSTALL_CMAKEDIR})

# pkg-config. Each file finds its prefix relative to itself (${pcfiledir}),
# so `cmake --install build --prefix /anywhere` gives working files:
#   hipline.pc         the shared library, with an rpath to ${libdir} so a
#                      program runs without LD_LIBRARY_PATH or ldconfig;
#   hipline-static.pc  the static library (-l:libhipline.a, which -lhipline
#                      would not pick beside libhipline.so) and what it needs.
if(IS_ABSOLUTE "${HIPLINE_INSTALL_PKGCONFIGDIR}")
  set(HL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH hl_pc_up "/hl-prefix/${HIPLINE_INSTALL_PKGCONFIGDIR}" "/hl-prefix")
  string(REGEX REPLACE "/$" "" hl_pc_up "${hl_pc_up}")
  set(HL_PC_PREFIX "\${pcfiledir}/${hl_pc_up}")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(HL_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(HL_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(hl_pc_deps "-pthread -lmsgpackc")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND hl_pc_deps " -l${lib}")
endforeach()
get_target_property(hl_type hipline TYPE)
# hipline.pc: the shared library (hipline_shared, or hipline itself in a
# BUILD_SHARED_LIBS build). Its dependencies are recorded in it.
set(hl_shared_target "")
if(TARGET hipline_shared)
  set(hl_shared_target hipline_shared)
elseif(hl_type STREQUAL "SHARED_LIBRARY")
  set(hl_shared_target hipline)
endif()
set(hl_pc_files "")
if(hl_shared_target)
  set(HL_PC_NAME "hipline")
  set(HL_PC_LIBS "-L\${libdir} -Wl,-rpath,\${libdir} -lhipline")
  set(HL_PC_LIBS_PRIVATE "${hl_pc_deps}")
  set(HL_PC_CFLAGS "-I\${includedir}")
  configure_file(${CMAKE_CURRENT_LIST_DIR}/hipline.pc.in
                 ${PROJECT_BINARY_DIR}/pkgconfig/hipline.pc @ONLY)
  list(APPEND hl_pc_files ${PROJECT_BINARY_DIR}/pkgconfig/hipline.pc)
endif()
if(hl_type STREQUAL "STATIC_LIBRARY")
  set(HL_PC_NAME "hipline-static")
  set(HL_PC_LIBS "\${libdir}/libhipline.a ${hl_pc_deps}")
  set(HL_PC_LIBS_PRIVATE "")
  set(HL_PC_CFLAGS "-I\${includedir} -DHIPLINE_STATIC_DEFINE")
  configure_file(${CMAKE_CURRENT_LIST_DIR}/hipline.pc.in
                 ${PROJECT_BINARY_DIR}/pkgconfig/hipline-static.pc @ONLY)
  list(APPEND hl_pc_files ${PROJECT_BINARY_DIR}/pkgconfig/hipline-static.pc)
endif()
install(FILES ${hl_pc_files} DESTINATION ${HIPLINE_INSTALL_PKGCONFIGDIR})

# The installed static library holds machine code only. The build's objects
# carry LTO bytecode beside it (-ffat-lto-objects, runtime/CMakeLists.txt);
# left in, a consumer's plain `gcc app.c libhipline.a` would run GCC's LTO
# over hipline (seconds instead of a fraction of one) and print hipline's
# own diagnostics. HIPLINE_INSTALL_LTO_BYTECODE=ON keeps it for consumers
# that link with -flto and want the cross-module inlining.
option(HIPLINE_INSTALL_LTO_BYTECODE
       "Keep the LTO bytecode in the installed libhipline.a" OFF)
if(hl_type STREQUAL "STATIC_LIBRARY" AND HIPLINE_LTO_ACTIVE AND
   NOT HIPLINE_INSTALL_LTO_BYTECODE)
  if(NOT CMAKE_OBJCOPY)
    message(FATAL_ERROR "hipline: objcopy is needed to install libhipline.a "
                        "without LTO bytecode (or -DHIPLINE_INSTALL_LTO_BYTECODE=ON)")
  endif()
  install(CODE "
    set(hl_archive \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libhipline.a\")
    execute_process(COMMAND \"${CMAKE_OBJCOPY}\"
        --remove-section=.gnu.lto_*  --remove-section=.gnu.debuglto_*
        --strip-symbol=__gnu_lto_v1 --strip-symbol=__gnu_lto_slim
        \"\${hl_archive}\" RESULT_VARIABLE hl_rc ERROR_VARIABLE hl_err)
    if(NOT hl_rc EQUAL 0)
      message(FATAL_ERROR \"removing LTO bytecode from \${hl_archive} failed: \${hl_err}\")
    endif()")
endif()

# Tools that exist in this build (bench/ and tools/ add them over time).
# With a shared libhipline they find it relative to themselves.
file(RELATIVE_PATH hl_bin_to_lib "/hl-prefix/${CMAKE_INSTALL_BINDIR}"
     "/hl-prefix/${CMAKE_INSTALL_LIBDIR}")
foreach(tool hipline-info hipline-stress)
  if(TARGET ${tool})
    if(hl_type STREQUAL "SHARED_LIBRARY" AND NOT IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
      set_property(TARGET ${tool} PROPERTY INSTALL_RPATH "$ORIGIN/${hl_bin_to_lib}")
    endif()
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# The Python helpers that hipline-stress and users call (stdlib only).
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/hipline-trace-convert
                 ${PROJECT_SOURCE_DIR}/tools/hipline-plot
        DESTINATION ${CMAKE_INSTALL_BINDIR})

# The shared library (libhipline.so.N, target hipline::hipline_shared) and the
# Python package over it (runtime/bindings/python/hipline, stdlib ctypes only),
# installed where the target interpreter looks (cmake/install_python.cmake).
# The package finds the library through _install_paths.py, which holds the
# path from the package to the library directory, so any --prefix works.
if(TARGET hipline_shared)
  install(TARGETS hipline_shared
    EXPORT hiplineTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    NAMELINK_COMPONENT Development)
  if(NOT DEFINED HIPLINE_PYTHON)
    find_package(Python3 COMPONENTS Interpreter)
    set(hl_default_python "")
    if(Python3_Interpreter_FOUND)
      set(hl_default_python "${Python3_EXECUTABLE}")
    endif()
  endif()
  set(HIPLINE_PYTHON "${hl_default_python}" CACHE FILEPATH
      "The Python interpreter cmake --install puts the hipline package for")
  set(HIPLINE_INSTALL_PYTHONDIR "" CACHE STRING
      "Where the hipline Python package is installed, relative to the prefix (empty: where HIPLINE_PYTHON looks)")
  # The fixed default of earlier builds, not on Debian's python3 path.
  if(HIPLINE_INSTALL_PYTHONDIR STREQUAL "${CMAKE_INSTALL_LIBDIR}/python3/dist-packages")
    set_property(CACHE HIPLINE_INSTALL_PYTHONDIR PROPERTY VALUE "")
  endif()
  configure_file(${CMAKE_CURRENT_LIST_DIR}/install_python.cmake
                 ${PROJECT_BINARY_DIR}/python-install/install_python.cmake @ONLY)
  install(SCRIPT ${PROJECT_BINARY_DIR}/python-install/install_python.cmake)
endif()
