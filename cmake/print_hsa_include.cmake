# Prints the HSA include directory the project builds against, as the one
# finder (kernel_replay_find_hsa.cmake) chooses it with the project's header
# cache, for the Rust build scripts:
#
#   cmake -P cmake/print_hsa_include.cmake       # prints the directory
#
# Exits non-zero, with the finder's message, when none is found.
cmake_minimum_required(VERSION 3.16)
include("${CMAKE_CURRENT_LIST_DIR}/kernel_replay_hsa_cache.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/kernel_replay_find_hsa.cmake")
kernel_replay_hsa_cache_dirs(cache_dirs "${CMAKE_CURRENT_LIST_DIR}/..")
kernel_replay_find_hsa_headers(found message ${cache_dirs})
if(NOT found)
  message(FATAL_ERROR "${message}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "${HSA_INCLUDE_DIR}")
