# install_consumer.cmake: installs this build into a fresh prefix, moves the
# prefix elsewhere (the package must be relocatable), checks the shared
# library's versioned file, SONAME and links there, then configures, builds
# and runs the separate consumer project (c_tests/consumer) against it with
# nothing but CMAKE_PREFIX_PATH, and builds and runs the same consumers with
# nothing but pkg-config (PKG_CONFIG_PATH). Run by ctest:
#
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DCONSUMER_DIR=... -DWORK_DIR=...
#         -DLIBDIR=... -DGENERATOR=... -DC_COMPILER=... -DCXX_COMPILER=...
#         -DHSA_INCLUDE_DIR=... -DEXPECTED_VERSION=...
#         -DSHARED_LIBRARY_NAME=libkernel_replay.so.<version>
#         -DSONAME=libkernel_replay.so.<major> -DSTATIC_NATIVE_LIBS=<a,b,...>
#         -DREADELF=... -DPKG_CONFIG=... -P install_consumer.cmake

cmake_minimum_required(VERSION 3.16)

foreach(required_variable BUILD_DIR SOURCE_DIR CONSUMER_DIR WORK_DIR LIBDIR GENERATOR
                          C_COMPILER CXX_COMPILER HSA_INCLUDE_DIR EXPECTED_VERSION
                          SHARED_LIBRARY_NAME SONAME STATIC_NATIVE_LIBS READELF PKG_CONFIG)
  if(NOT DEFINED ${required_variable})
    message(FATAL_ERROR "install_consumer.cmake needs -D${required_variable}=...")
  endif()
endforeach()

# Runs a command; fails the test with its output unless it exits 0.
function(run_or_fail what)
  execute_process(COMMAND ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what} failed (${status}):\n${output}\n${errors}")
  endif()
  message(STATUS "${what}: ok\n${output}")
endfunction()

# Like run_or_fail, and returns the output (stripped) in `out_var`.
function(output_or_fail out_var what)
  execute_process(COMMAND ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what} failed (${status}):\n${output}\n${errors}")
  endif()
  message(STATUS "${what}: ${output}")
  set(${out_var} "${output}" PARENT_SCOPE)
endfunction()

# Checks the dynamic section of `program`: it records NEEDED SONAME (or, with
# NOT_NEEDED, no libkernel_replay at all) and nothing of the build tree.
function(check_dynamic_section program)
  execute_process(COMMAND "${READELF}" -d "${program}"
                  OUTPUT_VARIABLE dynamic_section RESULT_VARIABLE status)
  foreach(build_tree_library_dir "${BUILD_DIR}/cargo" "${BUILD_DIR}/lib")
    string(FIND "${dynamic_section}" "${build_tree_library_dir}" position)
    if(NOT status EQUAL 0 OR NOT position EQUAL -1)
      message(FATAL_ERROR "${program} refers to the build tree:\n${dynamic_section}")
    endif()
  endforeach()
  string(REPLACE "." "\\." soname_pattern "${SONAME}")
  if(ARGV1 STREQUAL "NOT_NEEDED")
    if(dynamic_section MATCHES "\\(NEEDED\\)[^\n]*libkernel_replay")
      message(FATAL_ERROR "${program} needs the shared library:\n${dynamic_section}")
    endif()
  elseif(NOT dynamic_section MATCHES "\\(NEEDED\\)[^\n]*\\[${soname_pattern}\\]")
    message(FATAL_ERROR "${program} does not record NEEDED ${SONAME}:\n${dynamic_section}")
  endif()
  string(REGEX MATCHALL "\\((NEEDED|RUNPATH|RPATH)\\)[^\n]*" dynamic_entries
         "${dynamic_section}")
  string(REPLACE ";" "\n  " dynamic_entries "${dynamic_entries}")
  message(STATUS "${program}:\n  ${dynamic_entries}")
endfunction()

set(staged "${WORK_DIR}/staged")
set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# ---- install, then move the tree --------------------------------------------------

run_or_fail("cmake --install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${staged}")
file(RENAME "${staged}" "${prefix}")
foreach(installed
        "${LIBDIR}/${SHARED_LIBRARY_NAME}" "${LIBDIR}/${SONAME}" "${LIBDIR}/libkernel_replay.so"
        "${LIBDIR}/libkernel_replay.a"
        include/kernel_replay.h include/kernel_replay/memory_snapshot.hpp
        include/kernel_replay/memory_tracker.hpp
        "${LIBDIR}/cmake/kernel_replay/kernel_replayConfig.cmake"
        "${LIBDIR}/cmake/kernel_replay/kernel_replayConfigVersion.cmake"
        "${LIBDIR}/pkgconfig/kernel_replay.pc")
  if(NOT EXISTS "${prefix}/${installed}")
    message(FATAL_ERROR "the install is missing ${installed}")
  endif()
endforeach()

# The versioned file, its two links and its SONAME, as in the build tree.
run_or_fail("the installed library's SONAME and links" "${CMAKE_COMMAND}"
            "-DLIBRARY=${prefix}/${LIBDIR}/${SHARED_LIBRARY_NAME}" "-DSONAME=${SONAME}"
            "-DREADELF=${READELF}" -P "${CMAKE_CURRENT_LIST_DIR}/check_soname.cmake")

# ---- the consumer: configure, build -----------------------------------------------

# Only the moved prefix: no package registries, and the HSA headers found
# by the package's own search (HSA_INCLUDE_DIR in the environment is one of
# the places it looks, for machines where they are not in a standard place).
set(consumer_configure
  "${CMAKE_COMMAND}" -E env "HSA_INCLUDE_DIR=${HSA_INCLUDE_DIR}"
  "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -G "${GENERATOR}"
  "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  -DCMAKE_BUILD_TYPE=Debug
  "-DCMAKE_PREFIX_PATH=${prefix}"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
run_or_fail("configure the consumer" ${consumer_configure} -B "${consumer_build}"
            "-DKR_REQUIRED_VERSION=${EXPECTED_VERSION}")

file(STRINGS "${consumer_build}/CMakeCache.txt" package_dir_line REGEX "^kernel_replay_DIR:")
if(NOT package_dir_line STREQUAL "kernel_replay_DIR:PATH=${prefix}/${LIBDIR}/cmake/kernel_replay")
  message(FATAL_ERROR "the consumer found another kernel_replay package: ${package_dir_line}")
endif()

run_or_fail("build the consumer" "${CMAKE_COMMAND}" --build "${consumer_build}")

# Proof that the headers came from the prefix: no compile command names the
# source tree's include directory or the libraries' build directory.
file(READ "${consumer_build}/compile_commands.json" compile_commands)
foreach(forbidden "${SOURCE_DIR}/include" "${BUILD_DIR}/cargo" "${BUILD_DIR}/lib")
  string(FIND "${compile_commands}" "${forbidden}" position)
  if(NOT position EQUAL -1)
    message(FATAL_ERROR "a consumer compile command uses ${forbidden}:\n${compile_commands}")
  endif()
endforeach()
string(FIND "${compile_commands}" "${prefix}/include" position)
if(position EQUAL -1)
  message(FATAL_ERROR "no consumer compile command uses ${prefix}/include")
endif()

# And that the shared library is the installed one, by its SONAME: the
# executable's dynamic section (NEEDED, RUNPATH) does not point into the
# build tree.
check_dynamic_section("${consumer_build}/consumer_shared")
check_dynamic_section("${consumer_build}/consumer_static" NOT_NEEDED)

# ---- run them -------------------------------------------------------------------------

# The shared one must find libkernel_replay.so by itself (its RUNPATH), not
# through the environment.
run_or_fail("run consumer_shared"
            "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH "${consumer_build}/consumer_shared")
run_or_fail("run consumer_static"
            "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH "${consumer_build}/consumer_static")

# ---- the same consumers through pkg-config ----------------------------------------------

# Only the moved prefix's kernel_replay.pc; its paths come from its own
# location. The HSA headers are its Cflags' (the ones the library was built
# against): nothing else is passed. -Wpedantic is left out: pkg-config gives
# the HSA headers as -I, not as system headers, and they are not
# -Wpedantic-clean as C (see c_tests/CMakeLists.txt).
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config not found: install it (Debian: pkgconf; scripts/setup.sh "
                      "does) to test the installed kernel_replay.pc")
endif()
set(ENV{PKG_CONFIG_PATH} "${prefix}/${LIBDIR}/pkgconfig")
unset(ENV{PKG_CONFIG_LIBDIR})
set(pkg_build "${WORK_DIR}/pkg-config-build")
file(MAKE_DIRECTORY "${pkg_build}")

output_or_fail(pc_version "pkg-config --modversion" "${PKG_CONFIG}" --modversion kernel_replay)
if(NOT pc_version STREQUAL EXPECTED_VERSION)
  message(FATAL_ERROR "kernel_replay.pc says version ${pc_version}, not ${EXPECTED_VERSION}")
endif()
output_or_fail(pc_flags "pkg-config --cflags --libs"
               "${PKG_CONFIG}" --cflags --libs kernel_replay)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
output_or_fail(pc_cflags "pkg-config --cflags" "${PKG_CONFIG}" --cflags kernel_replay)
separate_arguments(pc_cflags UNIX_COMMAND "${pc_cflags}")
output_or_fail(pc_static_libs "pkg-config --static --libs"
               "${PKG_CONFIG}" --static --libs kernel_replay)
separate_arguments(pc_static_libs UNIX_COMMAND "${pc_static_libs}")

# Libs.private lists what the static library needs from the system
# (KR_STATIC_NATIVE_LIBS): the rest of --static --libs after -L and
# -lkernel_replay.
set(pc_private "${pc_static_libs}")
list(FILTER pc_private EXCLUDE REGEX "^-L")
list(REMOVE_ITEM pc_private -lkernel_replay)
string(REPLACE "," ";" expected_private "${STATIC_NATIVE_LIBS}")
list(TRANSFORM expected_private PREPEND "-l")
if(NOT pc_private STREQUAL expected_private)
  message(FATAL_ERROR "kernel_replay.pc's Libs.private is '${pc_private}', "
                      "not '${expected_private}'")
endif()

# The C consumer against the shared library, as `cc ... $(pkg-config --cflags
# --libs kernel_replay)` builds it; the rpath only spares LD_LIBRARY_PATH.
set(warnings -Wall -Wextra -Werror)
run_or_fail("build consumer_shared with pkg-config"
            "${C_COMPILER}" -std=c11 ${warnings} "-DKR_EXPECTED_VERSION=\"${EXPECTED_VERSION}\""
            "${CONSUMER_DIR}/consumer_shared.c" ${pc_flags}
            "-Wl,-rpath,${prefix}/${LIBDIR}" -o "${pkg_build}/consumer_shared")
check_dynamic_section("${pkg_build}/consumer_shared")
run_or_fail("run consumer_shared (pkg-config)"
            "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH "${pkg_build}/consumer_shared")

# The C++ consumer against the static library: the archive chosen over the
# .so beside it, then Libs.private.
run_or_fail("build consumer_static with pkg-config --static"
            "${CXX_COMPILER}" -std=c++17 ${warnings} "-DKR_EXPECTED_VERSION=\"${EXPECTED_VERSION}\""
            "${CONSUMER_DIR}/consumer_static.cpp" ${pc_cflags}
            "-L${prefix}/${LIBDIR}" -Wl,-Bstatic -lkernel_replay -Wl,-Bdynamic ${pc_private}
            -o "${pkg_build}/consumer_static")
check_dynamic_section("${pkg_build}/consumer_static" NOT_NEEDED)
run_or_fail("run consumer_static (pkg-config)"
            "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH "${pkg_build}/consumer_static")

# ---- a wrong HSA_INCLUDE_DIR is a clear configure error ------------------------------------

execute_process(
  COMMAND ${consumer_configure} -B "${WORK_DIR}/consumer-bad-hsa"
          "-DHSA_INCLUDE_DIR=${WORK_DIR}/no-such-hsa"
  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
# (CMake wraps the message, so its words are matched separately.)
if(status EQUAL 0 OR NOT errors MATCHES "HSA_INCLUDE_DIR is set to"
   OR NOT errors MATCHES "hsa/hsa_api_trace\\.h")
  message(FATAL_ERROR "configuring with a wrong HSA_INCLUDE_DIR should fail with a clear "
                      "message (status ${status}):\n${output}\n${errors}")
endif()
message(STATUS "a wrong HSA_INCLUDE_DIR is refused: ok")

# ---- another major version is not compatible (SameMajorVersion) ---------------------------

string(REGEX REPLACE "^([0-9]+).*" "\\1" major "${EXPECTED_VERSION}")
math(EXPR next_major "${major} + 1")
execute_process(
  COMMAND ${consumer_configure} -B "${WORK_DIR}/consumer-next-major"
          "-DKR_REQUIRED_VERSION=${next_major}.0"
  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
if(status EQUAL 0 OR NOT errors MATCHES "compatible with requested version")
  message(FATAL_ERROR "find_package(kernel_replay ${next_major}.0) should be refused by the "
                      "version file (status ${status}):\n${output}\n${errors}")
endif()
message(STATUS "find_package(kernel_replay ${next_major}.0) is refused: ok")
