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
#   lib/pkgconfig/hipline.pc                    pkg-config --cflags --libs hipline
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

# pkg-config. The file finds its prefix relative to itself (${pcfiledir}),
# so `cmake --install build --prefix /anywhere` gives a working hipline.pc.
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
# A static libhipline needs its dependencies on the consumer's link line; a
# shared one records them itself, so they only go to Libs.private.
set(hl_pc_deps "-pthread")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND hl_pc_deps " -l${lib}")
endforeach()
get_target_property(hl_type hipline TYPE)
if(hl_type STREQUAL "STATIC_LIBRARY")
  set(HL_PC_LIBS "-L\${libdir} -lhipline ${hl_pc_deps}")
  set(HL_PC_LIBS_PRIVATE "")
  set(HL_PC_CFLAGS "-I\${includedir} -DHIPLINE_STATIC_DEFINE")
else()
  set(HL_PC_LIBS "-L\${libdir} -lhipline")
  set(HL_PC_LIBS_PRIVATE "${hl_pc_deps}")
  set(HL_PC_CFLAGS "-I\${includedir}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/hipline.pc.in
               ${PROJECT_BINARY_DIR}/hipline.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/hipline.pc
        DESTINATION ${HIPLINE_INSTALL_PKGCONFIGDIR})

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
# Python package over it (runtime/bindings/python/hipline, stdlib ctypes only).
# The package finds the library through _install_paths.py, which holds the
# path from the package to the library directory, so any --prefix works:
#   PYTHONPATH=<prefix>/${HIPLINE_INSTALL_PYTHONDIR} python3 -c "import hipline"
if(TARGET hipline_shared)
  install(TARGETS hipline_shared
    EXPORT hiplineTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    NAMELINK_COMPONENT Development)
  set(HIPLINE_INSTALL_PYTHONDIR "${CMAKE_INSTALL_LIBDIR}/python3/dist-packages"
      CACHE STRING "Where the hipline Python package is installed, relative to the prefix")
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/bindings/python/hipline
    DESTINATION ${HIPLINE_INSTALL_PYTHONDIR}
    FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
  file(RELATIVE_PATH hl_py_to_lib "/hl-prefix/${HIPLINE_INSTALL_PYTHONDIR}/hipline"
       "/hl-prefix/${CMAKE_INSTALL_LIBDIR}")
  file(WRITE ${PROJECT_BINARY_DIR}/python-install/_install_paths.py
       "# Written by cmake --install: where libhipline.so is, relative to this package.\n"
       "LIBRARY_DIR = \"${hl_py_to_lib}\"\n"
       "LIBRARY_NAME = \"libhipline.so.${PROJECT_VERSION_MAJOR}\"\n")
  install(FILES ${PROJECT_BINARY_DIR}/python-install/_install_paths.py
    DESTINATION ${HIPLINE_INSTALL_PYTHONDIR}/hipline)
endif()
