# Finds the HSA headers kernel_replay.h builds on, in the order the library's
# own build script (build.rs) searches, so that a consumer sees the headers
# the library was built against:
#   the HSA_INCLUDE_DIR cache variable, $ENV{HSA_INCLUDE_DIR},
#   $ENV{ROCM_PATH}/include, /opt/rocm/include, /usr/include.
# The marker is hsa/hsa_api_trace.h: a tool needs it for the API tables it
# hands to kr_memory_tracker_init, and it only ships with the full headers.
#
# Used by the project's CMakeLists.txt and by the installed package
# (kernel_replayConfig.cmake), so both search the same way.
include_guard(GLOBAL)

# Sets the cache variable HSA_INCLUDE_DIR (the directory holding hsa/) and
# <found_var> (TRUE/FALSE) and <message_var> (why not, when FALSE) in the
# caller's scope.
function(kernel_replay_find_hsa_headers found_var message_var)
  set(marker "hsa/hsa_api_trace.h")
  # A directory the user named (-DHSA_INCLUDE_DIR=...) is kept by find_path
  # without searching; say so plainly if it is wrong, rather than letting a
  # compiler fail on a missing header later.
  if(HSA_INCLUDE_DIR AND NOT EXISTS "${HSA_INCLUDE_DIR}/${marker}")
    string(CONCAT why "HSA_INCLUDE_DIR is set to '${HSA_INCLUDE_DIR}', which does not "
                      "contain ${marker}")
    set(${found_var} FALSE PARENT_SCOPE)
    set(${message_var} "${why}" PARENT_SCOPE)
    return()
  endif()

  set(candidates "")
  if(NOT "$ENV{HSA_INCLUDE_DIR}" STREQUAL "")
    list(APPEND candidates "$ENV{HSA_INCLUDE_DIR}")
  endif()
  if(NOT "$ENV{ROCM_PATH}" STREQUAL "")
    list(APPEND candidates "$ENV{ROCM_PATH}/include")
  endif()
  list(APPEND candidates /opt/rocm/include /usr/include)
  find_path(HSA_INCLUDE_DIR
    NAMES "${marker}"
    PATHS ${candidates}
    NO_DEFAULT_PATH
    DOC "Directory holding hsa/hsa.h and hsa/hsa_api_trace.h")

  if(HSA_INCLUDE_DIR)
    set(${found_var} TRUE PARENT_SCOPE)
    set(${message_var} "" PARENT_SCOPE)
  else()
    string(REPLACE ";" ", " searched "${candidates}")
    string(CONCAT why "HSA headers not found (looked for ${marker} in ${searched}): install "
                      "libhsa-runtime-dev (Debian) or ROCm, or set HSA_INCLUDE_DIR to the "
                      "directory that holds ${marker}")
    set(${found_var} FALSE PARENT_SCOPE)
    set(${message_var} "${why}" PARENT_SCOPE)
  endif()
endfunction()
