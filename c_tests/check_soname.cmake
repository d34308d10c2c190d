# check_soname.cmake: the shared library is laid out as distributions ship
# one, in the build tree where the tests link it and in an install tree:
#
#   libkernel_replay.so.<version>                  the file, SONAME libkernel_replay.so.<major>
#   libkernel_replay.so.<major> -> libkernel_replay.so.<version>
#   libkernel_replay.so         -> libkernel_replay.so.<major>
#
# and, given PROGRAM, that a program linked to it records NEEDED
# libkernel_replay.so.<major>. Without a SONAME, a program records the path
# it was linked from (the build tree, a packaging stage directory) instead,
# which will not exist where it runs; without the versioned name, a later
# incompatible major version could not be installed beside this one.
#
#   cmake -DLIBRARY=<dir>/libkernel_replay.so.<version> -DSONAME=libkernel_replay.so.<major>
#         -DREADELF=<readelf> [-DPROGRAM=<program>] -P check_soname.cmake

cmake_minimum_required(VERSION 3.16)

foreach(required_variable LIBRARY SONAME READELF)
  if(NOT DEFINED ${required_variable})
    message(FATAL_ERROR "check_soname.cmake needs -D${required_variable}=...")
  endif()
endforeach()

# The dynamic section of `file`, into `out_var`.
function(dynamic_section file out_var)
  execute_process(COMMAND "${READELF}" -d "${file}"
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${READELF} -d ${file} failed (${status}):\n${errors}")
  endif()
  set(${out_var} "${output}" PARENT_SCOPE)
endfunction()

string(REPLACE "." "\\." soname_pattern "${SONAME}")

# ---- the file and its links --------------------------------------------------------

get_filename_component(directory "${LIBRARY}" DIRECTORY)
get_filename_component(file_name "${LIBRARY}" NAME)
if(NOT EXISTS "${LIBRARY}" OR IS_SYMLINK "${LIBRARY}" OR IS_DIRECTORY "${LIBRARY}")
  message(FATAL_ERROR "${LIBRARY} is not a file")
endif()
if(NOT file_name MATCHES "^${soname_pattern}\\.")
  message(FATAL_ERROR "${file_name} is not named ${SONAME}.<minor>.<patch>")
endif()
foreach(link_and_target "${SONAME}>${file_name}" "libkernel_replay.so>${SONAME}")
  string(REPLACE ">" ";" link_and_target "${link_and_target}")
  list(GET link_and_target 0 link)
  list(GET link_and_target 1 target)
  if(NOT IS_SYMLINK "${directory}/${link}")
    message(FATAL_ERROR "${directory}/${link} is not a symbolic link")
  endif()
  file(READ_SYMLINK "${directory}/${link}" found)
  if(NOT found STREQUAL target)
    message(FATAL_ERROR "${directory}/${link} points to ${found}, not ${target}")
  endif()
  message(STATUS "${link} -> ${target}")
endforeach()

# ---- the SONAME ---------------------------------------------------------------------

dynamic_section("${LIBRARY}" library_dynamic)
if(NOT library_dynamic MATCHES "\\(SONAME\\)[^\n]*\\[${soname_pattern}\\]")
  message(FATAL_ERROR "${LIBRARY} has no SONAME ${SONAME} (build.rs should pass "
                      "-Wl,-soname,${SONAME} for the cdylib):\n${library_dynamic}")
endif()
message(STATUS "${file_name}: SONAME ${SONAME}")

# ---- a program linked to it ----------------------------------------------------------

if(DEFINED PROGRAM)
  dynamic_section("${PROGRAM}" program_dynamic)
  if(NOT program_dynamic MATCHES "\\(NEEDED\\)[^\n]*\\[${soname_pattern}\\]")
    message(FATAL_ERROR "${PROGRAM} does not record NEEDED ${SONAME}:\n${program_dynamic}")
  endif()
  message(STATUS "${PROGRAM}: NEEDED ${SONAME}")
endif()
