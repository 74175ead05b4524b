# Fails the build when src/core (the pure scheduler library) reaches for gRPC,
# protobuf, files, threads, sockets or the clock. Run as `cmake -P` with
# CORE_DIR and STAMP set; test files (*_test.cc) are exempt.
file(GLOB_RECURSE sources ${CORE_DIR}/*.h ${CORE_DIR}/*.cc)
list(FILTER sources EXCLUDE REGEX "_test\\.cc$")
set(forbidden_includes
  "grpc" "google/protobuf" "proto/" "fstream" "filesystem" "thread" "mutex"
  "condition_variable" "future" "semaphore" "stop_token" "cstdio" "stdio.h"
  "iostream" "unistd.h" "fcntl.h" "pthread.h" "sys/" "netinet/" "arpa/"
  "absl/synchronization/")
set(forbidden_calls
  "absl::Now\\(" "::now\\(" "[^a-z_]time\\(nullptr\\)" "[^a-z_]rand\\(\\)"
  "std::random_device" "getenv\\(")
set(errors "")
foreach(src ${sources})
  file(STRINGS ${src} lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n}+1")
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"]")
      set(inc ${CMAKE_MATCH_1})
      foreach(bad ${forbidden_includes})
        if(inc MATCHES "(^|/)${bad}")
          string(APPEND errors "${src}:${n}: src/core must stay pure: #include <${inc}> is not allowed\n")
        endif()
      endforeach()
    endif()
    foreach(bad ${forbidden_calls})
      if(line MATCHES "${bad}")
        string(APPEND errors "${src}:${n}: src/core must stay pure: '${bad}' reads the world; pass it in\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(errors)
  message(NOTICE "${errors}")
  message(FATAL_ERROR "src/core purity check failed")
endif()
file(WRITE ${STAMP} "ok\n")
