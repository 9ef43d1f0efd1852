# cmake -P script: runs hipline-bench-timeline briefly with --json and checks
# that every case reported a positive figure.
execute_process(
  COMMAND ${BENCH} --json --submissions 50 --batches 2 --rounds 20
          --contention-batches 1
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hipline-bench-timeline exited ${rc}: ${err}")
endif()
foreach(path "submit;median_ns" "pingpong;median_us" "host_rtt;median_us"
        "contention;shared_device;1" "contention;shared_device;4"
        "contention;device_per_thread;2" "contention;device_per_thread;4")
  string(JSON value ERROR_VARIABLE json_error GET "${out}" ${path})
  if(json_error OR NOT value GREATER 0)
    message(FATAL_ERROR "bad ${path} in: ${out} (${json_error})")
  endif()
endforeach()
