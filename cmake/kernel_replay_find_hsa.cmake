# The one HSA-header finder. In order:
#   the HSA_INCLUDE_DIR cache variable, $ENV{HSA_INCLUDE_DIR},
#   $ENV{ROCM_PATH}/include, /opt/rocm/include (an installed ROCm wins, as in
#   an SDK build), then the extra directories the caller passes (the project
#   build passes its header cache, newest ROCm first: scripts/hsa_headers.sh
#   fills it), then /usr/include.
# The marker is hsa/hsa_api_trace.h: a tool needs it for the API tables it
# hands to kr_memory_tracker_init, and it only ships with the full headers.
#
# Used by the project's CMakeLists.txt, by the installed package
# (kernel_replayConfig.cmake), and, through print_hsa_include.cmake, by the
# Rust build scripts (build.rs, testing/hsa-runtime/rust/build.rs): every part of a build
# sees the same headers.
include_guard(GLOBAL)

# Sets the cache variable HSA_INCLUDE_DIR (the directory holding hsa/) and
# <found_var> (TRUE/FALSE) and <message_var> (why not, when FALSE) in the
# caller's scope. Further arguments are extra candidate directories, searched
# after an installed ROCm and before /usr/include.
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
  list(APPEND candidates /opt/rocm/include ${ARGN} /usr/include)
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
