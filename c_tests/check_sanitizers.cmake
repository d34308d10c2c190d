# Fails unless PROGRAM references the runtime of every sanitizer in SANITIZE
# (a comma-separated list such as address,undefined): proof that the
# sanitizer build really instruments the tests.
#   cmake -DPROGRAM=<exe> -DNM=<nm> -DSANITIZE=address,undefined -P check_sanitizers.cmake
execute_process(COMMAND "${NM}" "${PROGRAM}" OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${PROGRAM}")
endif()
set(marker_address "__asan_init")
set(marker_undefined "__ubsan_handle_")
string(REPLACE "," ";" sanitizers "${SANITIZE}")
foreach(sanitizer IN LISTS sanitizers)
  if(NOT DEFINED marker_${sanitizer})
    message(FATAL_ERROR "no known marker symbol for sanitizer '${sanitizer}'")
  endif()
  string(FIND "${symbols}" "${marker_${sanitizer}}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${PROGRAM} has no ${marker_${sanitizer}}*: not built with -fsanitize=${sanitizer}")
  endif()
  message(STATUS "${sanitizer}: ${marker_${sanitizer}} present")
endforeach()
