# The `trainyard` binary links gRPC, protobuf, Abseil, yaml-cpp, libyaml and
# SQLite from their static archives (Debian ships both kinds). Every CLI call
# starts a process: linked against ~60 shared libraries, the dynamic loader
# spent ~27 M of the ~38 M instructions of `trainyard --version` resolving
# their symbols (callgrind; docs/benchmarks.md, "The client's start-up").
# OpenSSL, zlib and cpp-httplib stay shared: cpp-httplib has no archive in
# Debian, and it must share OpenSSL with gRPC.
#
# Only executables with the TRAINYARD_STATIC_DEPS property take the archives;
# tests and benchmarks keep linking the shared libraries (a static gRPC in
# each of them would cost link time and disk for nothing). The switch is a
# generator expression on the property of the target being linked, so the
# module libraries stay one set of targets: ty_link_deps() below wraps each
# heavy dependency as "the shared target unless the executable links
# statically", and every wrapped dependency brings the one static group,
# which the linker reads as a single --start-group.

option(TRAINYARD_STATIC_BINARY "Link the trainyard binary against static gRPC/protobuf/Abseil" ON)
if(TRAINYARD_SANITIZE OR TRAINYARD_FUZZ)
  set(TRAINYARD_STATIC_BINARY OFF)
endif()

set(TY_HEAVY_DEP_REGEX "^(absl::.*|gRPC::grpc\\+\\+|protobuf::libprotobuf|yaml-cpp|PkgConfig::SQLITE3|PkgConfig::LIBYAML)$")
set(_ty_static "$<BOOL:$<TARGET_PROPERTY:TRAINYARD_STATIC_DEPS>>")

add_library(ty_static_deps_group INTERFACE)
if(TRAINYARD_STATIC_BINARY)
  execute_process(
    COMMAND ${PKG_CONFIG_EXECUTABLE} --static --libs-only-l grpc++ protobuf yaml-cpp sqlite3 yaml-0.1
            absl_flat_hash_map absl_flat_hash_set absl_random_random absl_status absl_statusor
            absl_str_format absl_strings absl_synchronization absl_time absl_inlined_vector absl_function_ref
    OUTPUT_VARIABLE _ty_libs OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _ty_rc)
  separate_arguments(_ty_libs UNIX_COMMAND "${_ty_libs}")
  list(REMOVE_DUPLICATES _ty_libs)
  # Shared on purpose (see above), or system libraries.
  list(REMOVE_ITEM _ty_libs -lssl -lcrypto -lz -ldl -lm -lrt -latomic)
  set(_ty_archives "")
  foreach(l IN LISTS _ty_libs)
    string(REGEX REPLACE "^-l" "" n "${l}")
    find_library(_ty_archive_${n} NAMES lib${n}.a NO_CACHE)
    if(NOT _ty_archive_${n})
      message(STATUS "trainyard links shared libraries: no lib${n}.a")
      set(TRAINYARD_STATIC_BINARY OFF)
      break()
    endif()
    list(APPEND _ty_archives "${_ty_archive_${n}}")
  endforeach()
  if(NOT _ty_rc EQUAL 0 OR NOT _ty_archives)
    set(TRAINYARD_STATIC_BINARY OFF)
  endif()
endif()
if(TRAINYARD_STATIC_BINARY)
  set(_ty_items "$<${_ty_static}:-Wl,--start-group>")
  foreach(a IN LISTS _ty_archives)
    list(APPEND _ty_items "$<${_ty_static}:${a}>")
  endforeach()
  list(APPEND _ty_items "$<${_ty_static}:-Wl,--end-group>"
       "$<${_ty_static}:OpenSSL::SSL>" "$<${_ty_static}:OpenSSL::Crypto>" "$<${_ty_static}:ZLIB::ZLIB>"
       "$<${_ty_static}:Threads::Threads>" "$<${_ty_static}:${CMAKE_DL_LIBS}>"
       "$<${_ty_static}:m>" "$<${_ty_static}:rt>" "$<${_ty_static}:atomic>")
  target_link_libraries(ty_static_deps_group INTERFACE ${_ty_items})
endif()

# ty_link_deps(TARGET PUBLIC|PRIVATE|INTERFACE DEPS...): target_link_libraries,
# with the heavy dependencies wrapped as above. Their include directories and
# definitions still reach every target.
function(ty_link_deps target scope)
  foreach(d IN LISTS ARGN)
    if(TRAINYARD_STATIC_BINARY AND d MATCHES "${TY_HEAVY_DEP_REGEX}")
      target_link_libraries(${target} ${scope} "$<$<NOT:${_ty_static}>:${d}>" ty_static_deps_group)
      target_include_directories(${target} SYSTEM ${scope} $<TARGET_PROPERTY:${d},INTERFACE_INCLUDE_DIRECTORIES>)
      target_compile_definitions(${target} ${scope} $<TARGET_PROPERTY:${d},INTERFACE_COMPILE_DEFINITIONS>)
    else()
      target_link_libraries(${target} ${scope} ${d})
    endif()
  endforeach()
endfunction()

# ty_static_binary(TARGET): the executable links the static group.
function(ty_static_binary target)
  if(TRAINYARD_STATIC_BINARY)
    set_target_properties(${target} PROPERTIES TRAINYARD_STATIC_DEPS ON)
  endif()
endfunction()
