# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# cmake -P script: HIPLINE_TRACE failures make a program fail, in any program
# (here hipline-bench-timeline, which does not handle the variable itself):
# a bad path at device creation, a failed write at exit; a good path works.
#   -DBENCH=<hipline-bench-timeline> -DWORK=<scratch directory>
set(args --submissions 10 --batches 1 --rounds 2 --contention-batches 1)
file(MAKE_DIRECTORY ${WORK})
function(expect path rc_want text)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env HIPLINE_TRACE=${path} ${BENCH} ${args}
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL rc_want)
    message(FATAL_ERROR "HIPLINE_TRACE=${path}: exit ${rc}, want ${rc_want}: ${err}")
  endif()
  if(text AND NOT err MATCHES "${text}")
    message(FATAL_ERROR "HIPLINE_TRACE=${path}: stderr lacks '${text}': ${err}")
  endif()
endfunction()
expect(${WORK}/missing-dir/t.json 1 "does not exist or is not writable")
expect(${WORK} 1 "is not a writable file")
if(EXISTS /dev/full)
  expect(/dev/full 1 "writing trace file '/dev/full' failed")
endif()
file(REMOVE ${WORK}/t.json)
expect(${WORK}/t.json 0 "")
file(READ ${WORK}/t.json trace)
if(NOT trace MATCHES "traceEvents")
  message(FATAL_ERROR "no trace written to ${WORK}/t.json")
endif()
