# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# hipline-stress: the allocation stress benchmark (bench/stress/, public API
# plus the bench-side replay log parser).
#
# HIPLINE_STRESS_DISPATCH picks the pattern oracle: ON uses the dispatch API
# (fill_pattern/verify_pattern kernels, hl_queue_spin); OFF writes and reads
# the pattern through host memory (for a runtime built without dispatch);
# AUTO (default) is ON when the runtime sources define hl_queue_fill_pattern.
set(HIPLINE_STRESS_DISPATCH AUTO CACHE STRING
    "hipline-stress pattern oracle: AUTO, ON (dispatch kernels) or OFF (host readback)")
set(hl_stress_dispatch ${HIPLINE_STRESS_DISPATCH})
if(hl_stress_dispatch STREQUAL "AUTO")
  set(hl_stress_dispatch OFF)
  file(GLOB_RECURSE hl_stress_runtime_sources CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/runtime/*.c)
  foreach(src ${hl_stress_runtime_sources})
    file(STRINGS ${src} hl_stress_hit REGEX "^hl_status_t hl_queue_fill_pattern\\(")
    if(hl_stress_hit)
      set(hl_stress_dispatch ON)
    endif()
  endforeach()
endif()
if(hl_stress_dispatch)
  set(hl_stress_dispatch_value 1)
else()
  set(hl_stress_dispatch_value 0)
  message(STATUS "hipline-stress: runtime has no dispatch yet; using the host-readback oracle")
endif()

add_executable(hipline-stress
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/main.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/options.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/run.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/oracle.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/report.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/terminal.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/workload_random.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/workload_multistream.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/workload_serving.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/workload_tp.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/workload_replay.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/torch_model.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stress/arena_model.c
  ${CMAKE_CURRENT_SOURCE_DIR}/replay_log.c)
target_include_directories(hipline-stress PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(hipline-stress PRIVATE
  HL_STRESS_HAVE_DISPATCH=${hl_stress_dispatch_value}
  HL_STRESS_TRACE_CONVERT="${PROJECT_SOURCE_DIR}/tools/hipline-trace-convert")
target_link_libraries(hipline-stress PRIVATE hipline::hipline hipline_warnings m
  Threads::Threads)
