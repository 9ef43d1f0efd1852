# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# hipline-info tests (label `tools`).
#
# This file has two modes. Included from tests/CMakeLists.txt it registers the
# tests; run with `cmake -DHL_INFO=<binary> -DHL_CHECK=<name> -P info.cmake`
# (as the tests do) it runs hipline-info and checks the result:
#   json      --json parses; host is available with at least one device; hip
#             is available or says why not.
#   human     the default report exits 0 and lists both backends.
#   bad_env   HIPLINE_BACKEND=bogus exits 2 and stderr names the variable and
#             its accepted values (both conditions, not just the exit code);
#             so does HIPLINE_HOST_MEMORY=12 (a size, out of range).
#   help      --help exits 0 and prints usage.
#   bad_flag  an unknown flag exits 2 with a message.
#   full      the report (human and --json) written to /dev/full exits 1
#             and says why on stderr; so does HIPLINE_TRACE naming a file
#             that cannot be written.

if(NOT CMAKE_SCRIPT_MODE_FILE)
  if(NOT TARGET hipline-info)
    return()
  endif()
  foreach(check json human bad_env help bad_flag full)
    add_test(NAME info.${check}
      COMMAND ${CMAKE_COMMAND} -DHL_INFO=$<TARGET_FILE:hipline-info>
              -DHL_CHECK=${check} -P ${CMAKE_CURRENT_LIST_FILE})
    set_tests_properties(info.${check} PROPERTIES LABELS tools TIMEOUT 120)
  endforeach()
  return()
endif()

# Script mode.
cmake_minimum_required(VERSION 3.20)
if(NOT HL_INFO OR NOT HL_CHECK)
  message(FATAL_ERROR "info.cmake: -DHL_INFO=<hipline-info> -DHL_CHECK=<check> required")
endif()

function(hl_info_fail)
  string(JOIN "" text ${ARGN})
  message(FATAL_ERROR "info.${HL_CHECK}: ${text}\n--- stdout ---\n${out}\n"
                      "--- stderr ---\n${err}")
endfunction()

# Runs hipline-info with |ARGN|; sets rc, out and err in the caller.
macro(hl_info_run)
  execute_process(COMMAND ${HL_INFO} ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
endmacro()

if(HL_CHECK STREQUAL "json")
  hl_info_run(--json)
  if(NOT rc EQUAL 0)
    hl_info_fail("hipline-info --json exited ${rc}, expected 0")
  endif()
  string(JSON count ERROR_VARIABLE json_error LENGTH "${out}" backends)
  if(json_error)
    hl_info_fail("output is not the expected JSON: ${json_error}")
  endif()
  if(count LESS 1)
    hl_info_fail("no backends listed")
  endif()
  set(seen "")
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${out}" backends ${i} name)
    string(JSON available GET "${out}" backends ${i} available)
    string(JSON reason GET "${out}" backends ${i} reason)
    string(JSON devices LENGTH "${out}" backends ${i} devices)
    list(APPEND seen ${name})
    if(name STREQUAL "host")
      if(NOT available OR devices LESS 1)
        hl_info_fail("host backend must be available with a device "
                     "(available=${available}, devices=${devices}, reason='${reason}')")
      endif()
    elseif(name STREQUAL "hip")
      if(NOT available AND reason STREQUAL "")
        hl_info_fail("hip backend is unavailable but gives no reason")
      endif()
    endif()
    if(available AND devices GREATER 0)
      # Every listed device carries its properties and no error.
      math(EXPR last_device "${devices} - 1")
      foreach(d RANGE ${last_device})
        string(JSON device_error ERROR_VARIABLE missing GET "${out}" backends ${i} devices ${d} error)
        if(NOT missing)
          hl_info_fail("${name} device ${d}: ${device_error}")
        endif()
        foreach(key name target memory_bytes)
          string(JSON value ERROR_VARIABLE missing GET "${out}" backends ${i} devices ${d} ${key})
          if(missing)
            hl_info_fail("${name} device ${d} has no '${key}'")
          endif()
        endforeach()
      endforeach()
    endif()
    message(STATUS "info: backend ${name}: available=${available} devices=${devices} ${reason}")
  endforeach()
  foreach(required host hip)
    if(NOT required IN_LIST seen)
      hl_info_fail("backend '${required}' is not listed (saw: ${seen})")
    endif()
  endforeach()

elseif(HL_CHECK STREQUAL "human")
  hl_info_run()
  if(NOT rc EQUAL 0)
    hl_info_fail("hipline-info exited ${rc}, expected 0")
  endif()
  if(NOT out MATCHES "backend host: available" OR NOT out MATCHES "backend hip: ")
    hl_info_fail("report does not list both backends with host available")
  endif()

elseif(HL_CHECK STREQUAL "bad_env")
  set(ENV{HIPLINE_BACKEND} bogus)
  hl_info_run(--json)
  if(NOT rc EQUAL 2)
    hl_info_fail("HIPLINE_BACKEND=bogus: exit ${rc}, expected 2")
  endif()
  foreach(word HIPLINE_BACKEND bogus auto hip host)
    string(FIND "${err}" "${word}" at)
    if(at LESS 0)
      hl_info_fail("HIPLINE_BACKEND=bogus: stderr does not mention '${word}'")
    endif()
  endforeach()
  # Out of the accepted range, though it parses as a size.
  unset(ENV{HIPLINE_BACKEND})
  set(ENV{HIPLINE_HOST_MEMORY} 12)
  hl_info_run(--json)
  string(FIND "${err}" "HIPLINE_HOST_MEMORY" at)
  if(NOT rc EQUAL 2 OR at LESS 0)
    hl_info_fail("HIPLINE_HOST_MEMORY=12: exit ${rc}, expected 2 and a "
                 "message naming it: ${err}")
  endif()
  unset(ENV{HIPLINE_HOST_MEMORY})

elseif(HL_CHECK STREQUAL "help")
  hl_info_run(--help)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "usage: hipline-info")
    hl_info_fail("--help: exit ${rc}, expected 0 and a usage line")
  endif()

elseif(HL_CHECK STREQUAL "bad_flag")
  hl_info_run(--no-such-flag)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "unknown argument")
    hl_info_fail("--no-such-flag: exit ${rc}, expected 2 and a message")
  endif()

elseif(HL_CHECK STREQUAL "full")
  if(NOT EXISTS /dev/full)
    message(STATUS "info.full: no /dev/full; nothing to check")
    return()
  endif()
  foreach(flags "" "--json")
    execute_process(COMMAND ${HL_INFO} ${flags}
      RESULT_VARIABLE rc OUTPUT_FILE /dev/full ERROR_VARIABLE err)
    set(out "(sent to /dev/full)")
    if(NOT rc EQUAL 1 OR NOT err MATCHES "writing the report failed")
      hl_info_fail("hipline-info ${flags} > /dev/full: exit ${rc}, expected 1 "
                   "and a message")
    endif()
  endforeach()
  set(ENV{HIPLINE_TRACE} /nonexistent-dir/trace.json)
  hl_info_run()
  unset(ENV{HIPLINE_TRACE})
  # An unwritable trace path is an invalid environment, refused up front.
  if(NOT rc EQUAL 2 OR NOT err MATCHES "HIPLINE_TRACE")
    hl_info_fail("HIPLINE_TRACE=/nonexistent-dir/trace.json: exit ${rc}, "
                 "expected 2 and a message naming it")
  endif()

else()
  message(FATAL_ERROR "info.cmake: unknown check '${HL_CHECK}'")
endif()
