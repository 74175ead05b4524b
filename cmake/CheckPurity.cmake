# Fails the build when a pure room reaches for gRPC, files, threads, sockets
# or the clock. Two rooms are pure: src/core (the scheduler library, which
# may not use protobuf either) and src/server/control (the server's logic,
# sans-IO: it speaks protobuf, the wire's types, and nothing else of the
# world). Run as `cmake -P` with DIR, ROOM (the name in messages) and STAMP
# set, and ALLOW_PROTO=ON for a room that may use protobuf; test files
# (*_test.cc, test_*.h) are exempt.
file(GLOB_RECURSE sources ${DIR}/*.h ${DIR}/*.cc)
list(FILTER sources EXCLUDE REGEX "(_test\\.cc|/test_[a-z_]+\\.h)$")
set(forbidden_includes
  "grpc" "fstream" "filesystem" "thread" "mutex"
  "condition_variable" "future" "semaphore" "stop_token" "cstdio" "stdio.h"
  "iostream" "unistd.h" "fcntl.h" "pthread.h" "sys/" "netinet/" "arpa/"
  "absl/synchronization/" "httplib")
if(NOT ALLOW_PROTO)
  list(APPEND forbidden_includes "google/protobuf" "proto/")
endif()
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
          string(APPEND errors "${src}:${n}: ${ROOM} must stay pure: #include <${inc}> is not allowed\n")
        endif()
      endforeach()
    endif()
    foreach(bad ${forbidden_calls})
      if(line MATCHES "${bad}")
        string(APPEND errors "${src}:${n}: ${ROOM} must stay pure: '${bad}' reads the world; pass it in\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(errors)
  message(NOTICE "${errors}")
  message(FATAL_ERROR "${ROOM} purity check failed")
endif()
file(WRITE ${STAMP} "ok\n")
