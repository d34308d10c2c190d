# check_exports.cmake: the shared library's dynamic symbol table is exactly
# the C ABI of kernel_replay.h. Every defined dynamic symbol must start with
# kr_ (a leaked Rust or runtime symbol could clash with the host process);
# every function the header declares must be exported, and every kr_ symbol
# exported must be declared there. The list comes from the header itself,
# so it cannot go stale.
#
#   cmake -DLIBRARY=<libkernel_replay.so> -DHEADER=<kernel_replay.h> -DNM=<nm>
#         -P check_exports.cmake

cmake_minimum_required(VERSION 3.16)

foreach(required_variable LIBRARY HEADER NM)
  if(NOT DEFINED ${required_variable})
    message(FATAL_ERROR "check_exports.cmake needs -D${required_variable}=...")
  endif()
endforeach()
if(NOT EXISTS "${LIBRARY}")
  message(FATAL_ERROR "no library at ${LIBRARY}")
endif()

# Every function declaration of the header: "<type> kr_name(" at the start
# of a line (typedefs of function pointers are "(*kr_..._t)" and not matched).
file(STRINGS "${HEADER}" declarations REGEX "^[a-z_ *0-9]*[ *](kr_[a-z0-9_]+)\\(")
set(required_functions "")
foreach(declaration IN LISTS declarations)
  if(declaration MATCHES "[ *](kr_[a-z0-9_]+)\\(")
    list(APPEND required_functions "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(LENGTH required_functions declared_count)
if(declared_count LESS 30)
  message(FATAL_ERROR "found only ${declared_count} functions in ${HEADER}: is it the generated header?")
endif()

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
set(undeclared "")
foreach(name IN LISTS exported)
  if(name MATCHES "^kr_" AND NOT name IN_LIST required_functions)
    list(APPEND undeclared "${name}")
  endif()
endforeach()

list(LENGTH exported exported_count)
message(STATUS "${LIBRARY}: ${exported_count} defined dynamic symbols, "
               "${declared_count} functions declared in ${HEADER}")
if(foreign OR missing OR undeclared)
  string(REPLACE ";" "\n  " foreign_text "${foreign}")
  string(REPLACE ";" "\n  " missing_text "${missing}")
  string(REPLACE ";" "\n  " undeclared_text "${undeclared}")
  message(FATAL_ERROR "export check failed\n"
                      "defined dynamic symbols not starting with kr_:\n  ${foreign_text}\n"
                      "functions the header declares, not exported:\n  ${missing_text}\n"
                      "kr_ symbols exported, not declared in the header:\n  ${undeclared_text}")
endif()
