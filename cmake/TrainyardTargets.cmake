# Helpers that give every Trainyard target the same warnings and layout.

# ty_options(TARGET): our warning set, applied to our code only. With
# TRAINYARD_THREAD_SAFETY (the `fuzz` and `tsa` presets, Clang only) it adds Clang's
# -Wthread-safety, which checks ABSL_GUARDED_BY and the lock annotations;
# TRAINYARD_TSA_WARN_ONLY (CMakeLists.txt) names the targets where it only
# warns for now.
function(ty_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-missing-field-initializers)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
    # GCC 12 at -O3 reports std::string's own inlined copies (a string moved
    # into an absl::StatusOr, say) as out of bounds, overflowing, overreading
    # or overlapping; which files it reports moves with inlining (precompiled
    # headers change it). Clang's fuzz build (ASan, UBSan) and the asan preset
    # check bounds where they are.
    target_compile_options(${target} PRIVATE -Wno-array-bounds -Wno-stringop-overflow -Wno-stringop-overread
                           -Wno-restrict)
  endif()
  if(TRAINYARD_THREAD_SAFETY)
    target_compile_options(${target} PRIVATE -Wthread-safety)
    if(target IN_LIST TRAINYARD_TSA_WARN_ONLY)
      target_compile_options(${target} PRIVATE -Wno-error=thread-safety)
    elseif(target IN_LIST TRAINYARD_TSA_WARN_ONLY_ATTRIBUTES)
      target_compile_options(${target} PRIVATE -Wno-error=thread-safety-attributes)
    endif()
  endif()
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
endfunction()

# Precompiled headers (TRAINYARD_PCH, on but in the tsa preset): a cold
# build of ours is mostly the parsing of the same few big headers (the
# generated protobuf classes, gtest, the standard library) in every file;
# each target parses them once into a precompiled header instead. The common
# set holds only what src/core may include (cmake/CheckCorePurity.cmake), so
# a core file that reaches for a forbidden header still names it; the shell
# set adds what the daemons' rooms use (not <iostream>, whose static
# initialiser would then run once per file at every start of the binary); a
# module adds its own heavy ones (PCH in ty_module). A file must still include
# what it uses; `make tsa` builds the libraries without precompiled headers
# and fails where one does not (make test does not run it, and no build
# compiles the tests without them).
set(TY_PCH_COMMON <algorithm> <cstdint> <functional> <map> <memory> <optional> <set> <string>
    <string_view> <unordered_map> <utility> <vector> <absl/status/statusor.h> <absl/strings/str_cat.h>
    <absl/strings/str_split.h> <absl/time/time.h>)
set(TY_PCH_SHELL <atomic> <filesystem> <fstream> <sstream> <thread>)
set(TY_PCH_TEST <gtest/gtest.h> <gmock/gmock.h>)

# ty_precompile(TARGET HEADER...): TARGET's files compile with the common set
# and HEADER... precompiled.
function(ty_precompile target)
  if(TRAINYARD_PCH)
    target_precompile_headers(${target} PRIVATE ${TY_PCH_COMMON} ${ARGN})
  endif()
endfunction()

# ty_library(NAME SOURCES... [DEPS ...] [PCH HEADER...]): a static library of
# one module; PCH: the headers to precompile beyond the common set.
function(ty_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;PCH" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  ty_options(${name})
  ty_precompile(${name} ${A_PCH})
  # Every module's sources pass the layering check before they compile.
  if(TARGET layering)
    add_dependencies(${name} layering)
  endif()
  set_property(GLOBAL APPEND PROPERTY TRAINYARD_LIBRARIES ${name})
  if(A_DEPS)
    ty_link_deps(${name} PUBLIC ${A_DEPS})
  endif()
endfunction()

# ty_test(NAME SOURCES... [DEPS ...] [LABELS ...] [PCH HEADER...]): a
# GoogleTest program registered with ctest, one ctest entry per test case.
# Test code is compiled at -O1 in the release build: what it runs is the
# libraries' code (-O3); its own is assertions, which -O3 only makes slower
# to compile.
function(ty_test name)
  if(NOT TRAINYARD_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;DEPS;LABELS;PCH" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  ty_options(${name})
  ty_precompile(${name} ${TY_PCH_SHELL} ${TY_PCH_TEST} ${A_PCH})
  target_compile_options(${name} PRIVATE $<$<CONFIG:Release>:-O1>)
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${A_LABELS}"
      ENVIRONMENT "TRAINYARD_BIN=${PROJECT_BINARY_DIR}/trainyard"
      # A second variable as its own property: a list in PROPERTIES keeps only
      # its first element.
      ENVIRONMENT_MODIFICATION "TRAINYARD_SOURCE_DIR=set:${PROJECT_SOURCE_DIR}")
endfunction()

# ty_bench(NAME SOURCES... [DEPS ...]): a Google Benchmark program; `make bench`
# runs all of them.
function(ty_bench name)
  if(NOT TRAINYARD_BUILD_BENCH)
    return()
  endif()
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  ty_options(${name})
  target_link_libraries(${name} PRIVATE ${A_DEPS} benchmark::benchmark)
  set_property(GLOBAL APPEND PROPERTY TRAINYARD_BENCHES ${name})
endfunction()

# ty_module(NAME DIR [DEPS ...] [TEST_DEPS ...]): the library of one module
# from every .cc under DIR (recursively) that is not a *_test.cc or main.cc,
# and one test program NAME_test from every *_test.cc there. A module with no
# sources yet is an INTERFACE library so dependents still link.
# PCH: headers to precompile for both (the library also gets the shell set
# unless PURE: src/core).
function(ty_module name)
  cmake_parse_arguments(A "PURE" "DIR;TIMEOUT" "DEPS;TEST_DEPS;LABELS;PCH" ${ARGN})
  file(GLOB_RECURSE all_cc CONFIGURE_DEPENDS ${A_DIR}/*.cc)
  set(lib_cc ${all_cc})
  list(FILTER lib_cc EXCLUDE REGEX "(_test|/main)\\.cc$")
  set(test_cc ${all_cc})
  list(FILTER test_cc INCLUDE REGEX "_test\\.cc$")
  if(lib_cc)
    if(A_PURE)
      ty_library(${name} SOURCES ${lib_cc} DEPS ${A_DEPS} PCH ${A_PCH})
    else()
      ty_library(${name} SOURCES ${lib_cc} DEPS ${A_DEPS} PCH ${TY_PCH_SHELL} ${A_PCH})
    endif()
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    ty_link_deps(${name} INTERFACE ${A_DEPS})
  endif()
  if(test_cc)
    ty_test(${name}_test SOURCES ${test_cc} DEPS ${name} ${A_TEST_DEPS}
      LABELS ${A_LABELS} TIMEOUT ${A_TIMEOUT} PCH ${A_PCH})
  endif()
endfunction()
