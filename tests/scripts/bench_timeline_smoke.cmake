# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# cmake -P script: runs hipline-bench-timeline briefly with --json and checks
# that every case reported a positive figure.
execute_process(
  COMMAND ${BENCH} --json --submissions 50 --batches 2 --rounds 20
          --contention-batches 1 --contention-repeats 3
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hipline-bench-timeline exited ${rc}: ${err}")
endif()
# The machine's core-to-core round trip: measured (> 0), or -1 with one CPU.
string(JSON rtt ERROR_VARIABLE json_error GET "${out}" core_round_trip_ns)
if(json_error OR NOT (rtt GREATER 0 OR rtt EQUAL -1))
  message(FATAL_ERROR "bad core_round_trip_ns in: ${out} (${json_error})")
endif()
foreach(path "submit;median_ns" "pingpong;median_us" "host_rtt;median_us"
        "host_rtt;waiter_cpu_us" "host_rtt;process_cpu_us"
        "release;median_us" "release;process_cpu_us" "contention;repeats"
        "contention;shared_device;1" "contention;shared_device;4"
        "contention;device_per_thread;2" "contention;device_per_thread;4")
  string(JSON value ERROR_VARIABLE json_error GET "${out}" ${path})
  if(json_error OR NOT value GREATER 0)
    message(FATAL_ERROR "bad ${path} in: ${out} (${json_error})")
  endif()
endforeach()

# Thread placement (--cpus): same and split run and say so in the JSON;
# split needs two CPUs, and says so when the process has one.
foreach(mode same split)
  execute_process(
    COMMAND ${BENCH} --json --cpus ${mode} --submissions 50 --batches 2
            --rounds 20 --contention-batches 1 --contention-repeats 1
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(mode STREQUAL "split" AND rc EQUAL 1 AND err MATCHES "needs two CPUs")
    message(STATUS "--cpus split skipped: ${err}")
    continue()
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "--cpus ${mode} exited ${rc}: ${err}")
  endif()
  string(JSON cpus ERROR_VARIABLE json_error GET "${out}" cpus)
  string(JSON value ERROR_VARIABLE json_error2 GET "${out}" submit median_ns)
  if(json_error OR json_error2 OR NOT cpus STREQUAL mode
     OR NOT value GREATER 0)
    message(FATAL_ERROR "--cpus ${mode}: bad output ${out}")
  endif()
endforeach()
execute_process(COMMAND ${BENCH} --cpus sideways
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "free', 'same' or 'split'")
  message(FATAL_ERROR "--cpus sideways: exit ${rc}, '${err}'")
endif()
