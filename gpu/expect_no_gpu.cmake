# expect_no_gpu.cmake: runs PROGRAM with ENVIRONMENT (NAME=VALUE|NAME=VALUE)
# and passes when it exits 77 saying TEXT, as a GPU program must on a
# machine it cannot use.
#   cmake -DPROGRAM=... -DTEXT=... -DENVIRONMENT=... -P expect_no_gpu.cmake
string(REPLACE "|" ";" assignments "${ENVIRONMENT}")
execute_process(COMMAND "${CMAKE_COMMAND}" -E env ${assignments} "${PROGRAM}"
                RESULT_VARIABLE code OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT code EQUAL 77 OR NOT output MATCHES "${TEXT}")
  message(FATAL_ERROR "${PROGRAM} (${ENVIRONMENT}): exit ${code}, not 77 saying \"${TEXT}\":\n"
                      "${output}")
endif()
