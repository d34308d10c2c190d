# check_soname.cmake: libkernel_replay.so carries the SONAME
# libkernel_replay.so. Without one, a program linked to it records the path
# it was linked from (the build tree, or a packaging stage directory) as its
# NEEDED entry instead of the library's name, so an installed or packaged
# consumer depends on a path that will not exist where it runs.
#
#   cmake -DLIBRARY=<libkernel_replay.so> -DREADELF=<readelf> -P check_soname.cmake

cmake_minimum_required(VERSION 3.16)

foreach(required_variable LIBRARY READELF)
  if(NOT DEFINED ${required_variable})
    message(FATAL_ERROR "check_soname.cmake needs -D${required_variable}=...")
  endif()
endforeach()

execute_process(COMMAND "${READELF}" -d "${LIBRARY}"
                RESULT_VARIABLE status OUTPUT_VARIABLE dynamic_section ERROR_VARIABLE errors)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${LIBRARY} failed (${status}):\n${errors}")
endif()
if(NOT dynamic_section MATCHES "\\(SONAME\\)[^\n]*\\[libkernel_replay\\.so\\]")
  message(FATAL_ERROR "${LIBRARY} has no SONAME libkernel_replay.so (build.rs should pass "
                      "-Wl,-soname,libkernel_replay.so for the cdylib):\n${dynamic_section}")
endif()
message(STATUS "${LIBRARY}: SONAME libkernel_replay.so")
