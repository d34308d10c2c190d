# kernel_replay_testing.cmake: what every C/C++ test directory shares (the
# test runtime's conformance suite in testing/hsa-runtime, the library's
# tests in c_tests): warnings, sanitizers, valgrind, test programs and their
# time limits. Included once from the root CMakeLists.txt (and from
# testing/hsa-runtime/CMakeLists.txt when gpu/ is built on its own).
include_guard(DIRECTORY)

set(KR_WARNINGS -Wall -Wextra -Wpedantic -Werror)
set(KR_TESTING_DIR "${CMAKE_CURRENT_LIST_DIR}/../testing")

# Every test gets a time limit, so a deadlock fails instead of hanging ctest.
set(KR_TEST_TIMEOUT_S 300)
# Under memcheck a test runs 20-50 times slower, and its leak check scans
# every readable byte: the host backend's simulated 16 GiB devices make that
# minutes for the conformance suite on a busy machine.
set(KR_MEMCHECK_TIMEOUT_S 900)

# KR_SANITIZE=address,undefined builds the test runtime and every test
# program with those sanitizers (the Rust library itself is not
# instrumented; its heap goes through the sanitizer's malloc, and valgrind
# covers its code). A directory opts in with kr_sanitize_directory(), a target
# with kr_sanitize(target) (the CUDA backend and the GPU programs are not
# instrumented: the stand-in driver they load is a plain shared library).
set(KR_SANITIZE "" CACHE STRING "Sanitizers for the C/C++ tests, e.g. address,undefined")
if(KR_SANITIZE)
  set(KR_SANITIZE_FLAGS -fsanitize=${KR_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
endif()
macro(kr_sanitize_directory)
  if(KR_SANITIZE)
    add_compile_options(${KR_SANITIZE_FLAGS})
    add_link_options(${KR_SANITIZE_FLAGS})
  endif()
endmacro()
function(kr_sanitize target)
  if(KR_SANITIZE)
    target_compile_options(${target} PRIVATE ${KR_SANITIZE_FLAGS})
    target_link_options(${target} PRIVATE ${KR_SANITIZE_FLAGS})
  endif()
endfunction()

# KR_VALGRIND runs every test program a second time under valgrind memcheck
# (tests labelled "memcheck"): any error, or any leak (definite, indirect or
# possible), fails the test. Memory still reachable at exit is not a leak:
# process-lifetime state (the runtime's tables, the library's statics) is
# deliberately never torn down.
option(KR_VALGRIND "Also run the test programs under valgrind memcheck" OFF)
if(KR_VALGRIND)
  if(KR_SANITIZE)
    message(FATAL_ERROR "KR_VALGRIND and KR_SANITIZE do not mix: use two build trees")
  endif()
  find_program(KR_VALGRIND_EXECUTABLE valgrind REQUIRED)
  set(KR_VALGRIND_COMMAND "${KR_VALGRIND_EXECUTABLE}" --error-exitcode=99 --leak-check=full
      --show-leak-kinds=definite,indirect,possible
      --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes
      "--suppressions=${KR_TESTING_DIR}/valgrind.supp")
endif()

# A test program from one source file, compiled as C or C++ `standard` with
# every warning an error, and check.h (the one check harness of every C/C++
# test) on its include path.
function(kr_test_program target source standard)
  add_executable(${target} ${source})
  get_filename_component(extension "${source}" EXT)
  if(extension STREQUAL ".c")
    set_target_properties(${target} PROPERTIES C_STANDARD ${standard} C_STANDARD_REQUIRED ON
                                               C_EXTENSIONS OFF)
  else()
    set_target_properties(${target} PROPERTIES CXX_STANDARD ${standard}
                                               CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  endif()
  target_compile_options(${target} PRIVATE ${KR_WARNINGS})
  # Imported targets' include directories are system directories by default,
  # which would hide every warning in kernel_replay.h / .hpp: the tests must
  # see them. The HSA headers stay system headers.
  set_target_properties(${target} PROPERTIES NO_SYSTEM_FROM_IMPORTED ON)
  target_include_directories(${target} SYSTEM PRIVATE "${HSA_INCLUDE_DIR}")
  target_include_directories(${target} PRIVATE "${KR_TESTING_DIR}")
endfunction()

# A ctest test with the time limit. A test whose command is one of our
# programs also runs under valgrind when KR_VALGRIND is on.
function(kr_add_test name)
  add_test(NAME ${name} COMMAND ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${KR_TEST_TIMEOUT_S})
  kr_add_memcheck_twin(${name} ${ARGN})
endfunction()

# memcheck_<name>: `program` and its arguments under valgrind, when
# KR_VALGRIND is on and `program` is one of our targets.
function(kr_add_memcheck_twin name program)
  if(KR_VALGRIND AND TARGET ${program})
    add_test(NAME memcheck_${name}
             COMMAND ${KR_VALGRIND_COMMAND} $<TARGET_FILE:${program}> ${ARGN})
    set_tests_properties(memcheck_${name} PROPERTIES TIMEOUT ${KR_MEMCHECK_TIMEOUT_S} LABELS memcheck)
  endif()
endfunction()
