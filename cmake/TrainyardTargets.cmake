# Helpers that give every Trainyard target the same warnings and layout.

# ty_options(TARGET): our warning set, applied to our code only. With
# TRAINYARD_THREAD_SAFETY (the `fuzz` and `tsa` presets, Clang only) it adds Clang's
# -Wthread-safety, which checks ABSL_GUARDED_BY and the lock annotations;
# TRAINYARD_TSA_WARN_ONLY (CMakeLists.txt) names the targets where it only
# warns for now.
function(ty_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-missing-field-initializers)
  if(TRAINYARD_UNITY AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # In a unity batch every file is an included one, and GCC then warns of a
    # class in one file that holds a type of another's anonymous namespace.
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
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

# ty_unity_groups(TARGET): under TRAINYARD_UNITY, a library's batch holds files
# of one directory only, at most TRAINYARD_UNITY_BATCH of them (0: no limit),
# the directory's files spread evenly over its batches. The files of a batch
# see each other's includes; kept within one directory (one room), a file
# cannot use another room's header without naming it, which the layering and
# purity checks (they read #include lines) rely on. A source added to the
# library after this (target_sources) has no group and compiles alone. Tests, benchmarks and
# programs keep plain batches (fewer compiler runs): a test program's files all
# belong to its module's top-level room (Layering.cmake), and purity does not
# read tests.
function(ty_unity_groups target)
  if(NOT TRAINYARD_UNITY)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(keys "")
  foreach(src IN LISTS sources)
    if(NOT src MATCHES "\\.(cc|cpp|cxx)$")
      continue()
    endif()
    get_filename_component(abs ${src} ABSOLUTE BASE_DIR ${source_dir})
    get_filename_component(dir ${abs} DIRECTORY)
    file(RELATIVE_PATH dir ${PROJECT_SOURCE_DIR} ${dir})
    string(MAKE_C_IDENTIFIER "${dir}" key)
    list(APPEND keys ${key})
    list(APPEND files_${key} ${src})
  endforeach()
  list(REMOVE_DUPLICATES keys)
  set_property(TARGET ${target} PROPERTY UNITY_BUILD_MODE GROUP)
  foreach(key IN LISTS keys)
    list(LENGTH files_${key} n)
    set(per ${n})
    if(TRAINYARD_UNITY_BATCH GREATER 0 AND n GREATER TRAINYARD_UNITY_BATCH)
      math(EXPR batches "(${n} + ${TRAINYARD_UNITY_BATCH} - 1) / ${TRAINYARD_UNITY_BATCH}")
      math(EXPR per "(${n} + ${batches} - 1) / ${batches}")
    endif()
    set(i 0)
    foreach(src IN LISTS files_${key})
      math(EXPR batch "${i} / ${per}")
      set_property(SOURCE ${src} TARGET_DIRECTORY ${target} PROPERTY UNITY_GROUP "${key}_${batch}")
      math(EXPR i "${i} + 1")
    endforeach()
  endforeach()
endfunction()

# ty_library(NAME SOURCES... [DEPS ...]): a static library of one module.
function(ty_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  ty_options(${name})
  ty_unity_groups(${name})
  # Every module's sources pass the layering check before they compile.
  if(TARGET layering)
    add_dependencies(${name} layering)
  endif()
  set_property(GLOBAL APPEND PROPERTY TRAINYARD_LIBRARIES ${name})
  if(A_DEPS)
    ty_link_deps(${name} PUBLIC ${A_DEPS})
  endif()
endfunction()

# ty_test(NAME SOURCES... [DEPS ...] [LABELS ...]): a GoogleTest program
# registered with ctest, one ctest entry per test case. Its own files are
# compiled at -O1 in the release build (the libraries it links stay at -O3;
# only what its files inline from headers runs at -O1): they are set-up and
# assertions, which -O3 makes slower to compile and no faster to run.
function(ty_test name)
  if(NOT TRAINYARD_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  ty_options(${name})
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
# from every .cc under DIR (recursively) that is not a *_test.cc, main.cc or
# main_*.cc (an executable's own sources),
# and one test program NAME_test from every *_test.cc there. A module with no
# sources yet is an INTERFACE library so dependents still link.
function(ty_module name)
  cmake_parse_arguments(A "" "DIR;TIMEOUT" "DEPS;TEST_DEPS;LABELS" ${ARGN})
  file(GLOB_RECURSE all_cc CONFIGURE_DEPENDS ${A_DIR}/*.cc)
  set(lib_cc ${all_cc})
  list(FILTER lib_cc EXCLUDE REGEX "(_test|/main|/main_[a-z_]+)\\.cc$")
  set(test_cc ${all_cc})
  list(FILTER test_cc INCLUDE REGEX "_test\\.cc$")
  if(lib_cc)
    ty_library(${name} SOURCES ${lib_cc} DEPS ${A_DEPS})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    ty_link_deps(${name} INTERFACE ${A_DEPS})
  endif()
  if(test_cc)
    ty_test(${name}_test SOURCES ${test_cc} DEPS ${name} ${A_TEST_DEPS}
      LABELS ${A_LABELS} TIMEOUT ${A_TIMEOUT})
  endif()
endfunction()
