# check_exports.cmake: the shared library's dynamic symbol table is exactly
# the C ABI. Every defined dynamic symbol must start with kr_ (a leaked Rust
# or runtime symbol could clash with the host process), and every function
# kernel_replay.h promises must be there.
#
#   cmake -DLIBRARY=<libkernel_replay.so> -DNM=<nm> -P check_exports.cmake

cmake_minimum_required(VERSION 3.16)

foreach(required_variable LIBRARY NM)
  if(NOT DEFINED ${required_variable})
    message(FATAL_ERROR "check_exports.cmake needs -D${required_variable}=...")
  endif()
endforeach()
if(NOT EXISTS "${LIBRARY}")
  message(FATAL_ERROR "no library at ${LIBRARY}")
endif()

set(required_functions
  kr_memory_tracker_init kr_set_tracking_enabled kr_tracking_enabled kr_finalize
  kr_is_finalized kr_set_executable_iterator kr_snap kr_snapshot_ok
  kr_snapshot_decline_reason kr_snapshot_region_count kr_snapshot_byte_count kr_restore
  kr_restore_with_report kr_snapshot_free kr_set_host_budget kr_host_bytes_in_use
  kr_tracked_count kr_tracked_bytes kr_replay kr_replay_gate kr_set_log_callback
  kr_set_log_level kr_version kr_set_storage_policy kr_storage_policy kr_set_device_budget
  kr_set_storage_pools kr_set_batched_copies kr_trim_retained kr_device_bytes_in_use
  kr_snapshot_tier_bytes kr_get_stats kr_reset_stats)

execute_process(
  COMMAND "${NM}" -D --defined-only "${LIBRARY}"
  RESULT_VARIABLE nm_status
  OUTPUT_VARIABLE nm_output
  ERROR_VARIABLE nm_errors)
if(NOT nm_status EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${nm_status}):\n${nm_errors}")
endif()

# nm lines are "<address> <type> <name>[@version]"; keep the names.
string(REPLACE "\n" ";" nm_lines "${nm_output}")
set(exported "")
set(foreign "")
foreach(line IN LISTS nm_lines)
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] +([^ @]+)")
    set(name "${CMAKE_MATCH_1}")
    list(APPEND exported "${name}")
    if(NOT name MATCHES "^kr_")
      list(APPEND foreign "${line}")
    endif()
  elseif(NOT line STREQUAL "")
    list(APPEND foreign "unparsed nm line: ${line}")
  endif()
endforeach()

set(missing "")
foreach(function IN LISTS required_functions)
  if(NOT function IN_LIST exported)
    list(APPEND missing "${function}")
  endif()
endforeach()

list(LENGTH exported exported_count)
message(STATUS "${LIBRARY}: ${exported_count} defined dynamic symbols")
if(foreign OR missing)
  string(REPLACE ";" "\n  " foreign_text "${foreign}")
  string(REPLACE ";" "\n  " missing_text "${missing}")
  message(FATAL_ERROR "export check failed\n"
                      "defined dynamic symbols not starting with kr_:\n  ${foreign_text}\n"
                      "required functions not exported:\n  ${missing_text}")
endif()
