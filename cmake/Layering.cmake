# The rooms (modules) of src/ and what each may depend on: the one table that
# the build enforces, on #include lines (CheckLayering.cmake, before any
# library compiles) and on target_link_libraries (at configure time).
# docs/architecture.md ("Rooms and what may depend on what") explains it.
#
# A room may always use its own files and those of its sub-rooms. An entry is
# a room (all of its files, sub-rooms included) or one header, for a
# dependency that is allowed only that narrowly. A *_test.cc belongs to its
# top-level room, because its test program is that room's. This file is
# included both by the project and by `cmake -P` scripts, so it defines only
# variables, macros and functions.

# ty_room(ROOM [ALLOWED...]): ROOM (a directory under src/, or proto) may
# include and link ALLOWED.
macro(ty_room room)
  list(APPEND TY_ROOMS ${room})
  set(TY_ALLOW_${room} ${ARGN})
endmacro()

set(TY_ROOMS "")
ty_room(proto)
ty_room(common)
ty_room(core             common)
ty_room(api              core common proto)
ty_room(store            api common proto)
# The library that workers link: the wire framing of the job master and the
# worker table's encoding (both wire contracts) are its only ways into the
# rest of jobmaster/.
ty_room(jobmaster        common proto)
ty_room(jobmaster/client common proto jobmaster/frame.h jobmaster/worker_table.h)
# Users and their rights (tokens, the client config, ACLs, jobs' credentials).
ty_room(security         api common proto)
# A daemon's HTTP endpoint (threads, caps, deadlines; cpp-httplib for the
# protocol), shared by the server's HTTP API and each agent's /metrics.
ty_room(httpd            common)
ty_room(server           security httpd api store core common proto)
# The control state (ControlState, its handlers, the node table and the
# persister): the server's logic, sans-IO. It sees the shell (JobManager,
# the agents' streams, gRPC) only through the backend interface and the
# published views, and is checked for purity as src/core is (no threads,
# sockets, files or clock: cmake/CheckPurity.cmake).
ty_room(server/control   api store core common proto server/admission.h server/config.h server/event_list.h
                         server/execution_backend.h server/logs/log_places.h server/schedules.h server/stats.h
                         server/view_store.h)
# The HTTP API (REST, /metrics) reads only what the server publishes (the
# views and counters) and acts only through its RestBackend interface: never
# the control state, the shell's lock or the store.
ty_room(server/http      security httpd api common proto server/view_store.h server/event_list.h server/stats.h
                         server/api_counters.h server/connection_guard.h server/master_metrics.h
                         server/join_guard.h server/service_links.h
                         server/user_rate_limiter.h)
# The log hub (the logs streams a server relays from agents) and its readers:
# the counters it publishes and the reader interface the HTTP API reads
# through are its only ways into the rest of the server.
ty_room(server/logs      security common proto server/stats.h server/http/log_reader.h)
ty_room(agent            httpd api core common proto)
ty_room(sim              api core common)
ty_room(cli              security server agent jobmaster sim httpd api store core common proto)

# ty_room_rule(ROOM OUT): "ROOM may depend on a, b" for a message.
function(ty_room_rule room out)
  set(allowed ${TY_ALLOW_${room}})
  if(allowed)
    list(JOIN allowed ", " text)
    set(${out} "${room} may depend on ${text}" PARENT_SCOPE)
  else()
    set(${out} "${room} may depend on nothing of ours" PARENT_SCOPE)
  endif()
endfunction()

# ty_room_allows(ROOM PATH OUT): OUT is TRUE when a file of ROOM may use PATH
# (an include path such as "store/state_store.h", or a room name).
function(ty_room_allows room path out)
  set(${out} TRUE PARENT_SCOPE)
  foreach(entry ${room} ${TY_ALLOW_${room}})
    if(path STREQUAL entry)
      return()
    endif()
    string(FIND "${path}" "${entry}/" at)
    if(at EQUAL 0)
      return()
    endif()
  endforeach()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

# ty_room_of(PATH OUT): the room that PATH (relative to src/) lies in: the
# longest room that is a prefix of it, or "" when none is.
function(ty_room_of path out)
  set(best "")
  foreach(room ${TY_ROOMS})
    string(FIND "${path}" "${room}/" at)
    string(LENGTH "${room}" len)
    string(LENGTH "${best}" best_len)
    if(at EQUAL 0 AND len GREATER best_len)
      set(best ${room})
    endif()
  endforeach()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

# ty_layering_check(): the `layering` target, which every ty_library depends
# on, so a forbidden #include fails the build before anything compiles.
function(ty_layering_check)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS
    ${PROJECT_SOURCE_DIR}/src/*.h ${PROJECT_SOURCE_DIR}/src/*.cc)
  set(stamp ${PROJECT_BINARY_DIR}/layering.stamp)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DROOT_DIR=${PROJECT_SOURCE_DIR} -DSTAMP=${stamp}
            -P ${PROJECT_SOURCE_DIR}/cmake/CheckLayering.cmake
    DEPENDS ${sources} ${PROJECT_SOURCE_DIR}/cmake/CheckLayering.cmake
            ${PROJECT_SOURCE_DIR}/cmake/Layering.cmake
    COMMENT "Checking that every module includes only what cmake/Layering.cmake allows")
  add_custom_target(layering DEPENDS ${stamp})
endfunction()

# ty_room_target(ROOM OUT): the library target of ROOM (trainyard_<room>,
# "/" as "_").
function(ty_room_target room out)
  string(REPLACE "/" "_" name "trainyard_${room}")
  set(${out} ${name} PARENT_SCOPE)
endfunction()

# ty_check_layering_links(): fails the configuration when a module's library
# (or its test program) links a module that the table does not allow. Call
# it after every module is defined.
function(ty_check_layering_links)
  set(errors "")
  foreach(room ${TY_ROOMS})
    ty_room_target(${room} target)
    if(NOT TARGET ${target})
      continue()
    endif()
    get_target_property(dir ${target} SOURCE_DIR)
    file(RELATIVE_PATH where ${PROJECT_SOURCE_DIR} ${dir}/CMakeLists.txt)
    ty_room_rule(${room} rule)
    foreach(t ${target} ${target}_test)
      if(NOT TARGET ${t})
        continue()
      endif()
      get_target_property(type ${t} TYPE)
      set(deps "")
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(deps ${t} LINK_LIBRARIES)
      endif()
      get_target_property(ideps ${t} INTERFACE_LINK_LIBRARIES)
      # A PUBLIC dependency is in both lists.
      set(all_deps ${deps} ${ideps})
      list(REMOVE_DUPLICATES all_deps)
      foreach(dep ${all_deps})
        if(NOT dep MATCHES "^trainyard_(.+)$")
          continue()
        endif()
        set(dep_room "")
        foreach(r ${TY_ROOMS})
          ty_room_target(${r} rt)
          if(rt STREQUAL dep)
            set(dep_room ${r})
          endif()
        endforeach()
        if(NOT dep_room)
          string(APPEND errors "${where}: ${t} links ${dep}, which is not a room of cmake/Layering.cmake\n")
          continue()
        endif()
        ty_room_allows(${room} ${dep_room} ok)
        if(NOT ok)
          string(APPEND errors "${where}: ${t} links ${dep}: ${rule}\n")
        endif()
      endforeach()
    endforeach()
  endforeach()
  if(errors)
    message(NOTICE "${errors}")
    message(FATAL_ERROR "layering check failed: links that cmake/Layering.cmake does not allow")
  endif()
endfunction()

# ty_layering_tests(): ctest cases that prove both checks fail on the
# violations in tests/layering_fixture (and report none of its allowed uses).
function(ty_layering_tests)
  set(fixture ${PROJECT_SOURCE_DIR}/tests/layering_fixture)
  add_test(NAME layering_check_rejects_forbidden_include
    COMMAND ${CMAKE_COMMAND} -DROOT_DIR=${fixture} -DSTAMP=${PROJECT_BINARY_DIR}/layering_fixture.stamp
            -P ${PROJECT_SOURCE_DIR}/cmake/CheckLayering.cmake)
  set_tests_properties(layering_check_rejects_forbidden_include PROPERTIES
    PASS_REGULAR_EXPRESSION
      "src/core/bad_core.cc includes proto/trainyard.pb.h: core may depend on common\n.*src/jobmaster/client/bad_client.cc includes jobmaster/master_state.h: jobmaster/client may depend on common, proto, jobmaster/frame.h, jobmaster/worker_table.h\n.*src/store/bad_store.cc includes server/job_manager.h: store may depend on api, common, proto\n.*src/unlisted is not a room.*layering check failed"
    FAIL_REGULAR_EXPRESSION "includes (core/|common/|api/|store/|jobmaster/frame.h|jobmaster/test_master.h|jobmaster/client/)")
  add_test(NAME layering_check_rejects_forbidden_link
    COMMAND ${CMAKE_COMMAND} -S ${fixture}/links -B ${PROJECT_BINARY_DIR}/layering_links_fixture
            -G ${CMAKE_GENERATOR})
  set_tests_properties(layering_check_rejects_forbidden_link PROPERTIES
    PASS_REGULAR_EXPRESSION
      "trainyard_core links trainyard_ps_sgd, which is not a room.*trainyard_store links trainyard_server: store may depend on api, common, proto.*layering check failed"
    FAIL_REGULAR_EXPRESSION "links trainyard_(api|common|store)[:,]")
endfunction()
