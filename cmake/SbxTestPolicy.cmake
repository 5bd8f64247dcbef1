# SbxTestPolicy.cmake - every test's class, timeout, scope and lock from one
# place (docs/testing.md). Each tests/*/CMakeLists.txt ends with
# sbx_test_policy(), which applies this to the tests defined in that file.
#
# Classes (exactly one per test; scripts/test.sh refuses a test without one):
#   fast     no engine, no services (cmocka units, loopback servers, promtool)
#   service  PostgreSQL, Chromium or Prometheus (started by the test or its fixture)
#   engine   the test Docker engine (SBX_TEST_DOCKER_HOST)
# and on top
#   slow     measured over a minute (SBX_TEST_SECONDS below)
#
# A test defined with today's labels is classed by them: `runtime` -> engine,
# `unit`, `contract` or none -> fast (service tests are declared with
# sbx_add_pg_test() or the label `service`). The old labels `unit` and
# `runtime` are dropped; `contract` is kept next to the class.

# Seconds each test took under ASan+UBSan on the 2-core CI machine with the
# suite running side by side (scripts/test.sh prints the slowest ten of every
# run; update a row when its test's time moves by more than a third).
# TIMEOUT = 3 x this, at least 60 s. Tests without a row get their class's
# default below until measured.
set(SBX_TEST_SECONDS
  # the first side-by-side run (ctest -j3, load average 11-22 from other
  # builds on the 2 cores; tests under 10 s keep their class's default)
  runtime_test_docker_idmap=244 runtime_test_warm_pool=229
  test_fleet_scale=134 test_cli=128 runtime_test_docker_run=115 runtime_test_abuse_box=100
  runtime_test_credentials=98 runtime_test_docker_sidecar=144 mcp_sdk_client=94 completion=76
  test_fleet_docker=68 runtime_test_spike=130 man_pages=61 runtime_test_exec_agent_docker=50
  test_fleet_fwdtcp=50 test_fleet_stop=43 test_fleet_fwdkill=37 test_serve_env=34
  test_fleet_jobs=90 test_fleet_bad=33 test_provider_host=33 test_cli_json=33 install_layout=33
  runtime_test_run_via_runner=32 web_status_page=32 runtime_test_egress_docker=77
  test_store_fleet_pg=31 test_serve_trust=29 test_egress_abuse=25
  runtime_test_egress_tunnel_docker=24 runtime_test_docker_quota=40 test_agents=22
  runtime_test_egress_transparent=30 test_egress_names=15
  test_store_pg=21 test_serve_ops=20 runtime_test_opensandbox_cli=19 prometheus_dashboard=18
  test_serve_hooks=16 test_egress_runtime=16 test_opensandbox=15 test_store=14 test_infisical=13
  test_opensandbox_exec=12 test_mcp_runner=12 test_config_keys=11 test_policy=11
  # alone, same machine
  test_fleet_fwdtask=44 runtime_test_docker_task=151
  # issue 27 (ASan+UBSan, alone, one engine shared with five other builds)
  runtime_test_docker_sidecar_pull=38
  runtime_test_docker_worktree_git=107
  # issue 30 (terminals and ports)
  runtime_test_term_port_docker=100
  # issue 30 (ASan+UBSan: 11-17 s on a shared engine)
  runtime_test_docker_files=20
  runtime_test_snapshot_async_docker=12
  # issue 29 (SBOM of the final image; ASan+UBSan, beside another engine test)
  image_sbom=45
)
# fast: kept at 120 s although the slowest fast test without a row took 5 s in
# `ctest -L fast` at load 10: beside the engine tests at load 22, test_cli took
# 128 s where it takes 19 s there
set(SBX_TEST_DEFAULT_TIMEOUT_fast 120)
set(SBX_TEST_DEFAULT_TIMEOUT_service 600)
set(SBX_TEST_DEFAULT_TIMEOUT_engine 600)

# The engine tests that need the box to themselves (RUN_SERIAL: nothing else
# runs beside them). docs/testing.md says why for each.
set(SBX_TEST_ALONE
  runtime_test_docker_quota   # counts the box's loop devices and mounts (or qgroups) before and after
  runtime_test_abuse_box      # memory admission against the host, fork bomb, CPU, inotify pool
  runtime_test_spike          # measures warm start and concurrency: timings of the box
)

# The run's PostgreSQL: one cluster per build directory, a socket path short
# enough for sun_path wherever the build directory is.
string(MD5 _sbx_pg_hash "${CMAKE_BINARY_DIR}")
string(SUBSTRING "${_sbx_pg_hash}" 0 10 _sbx_pg_hash)
set(SBX_TEST_PG_SHARED_DIR /tmp/sbx-pg-run-${_sbx_pg_hash})

# sbx_add_pg_test(NAME <name> COMMAND <cmd> [args...] [PRIVATE])
# A test run inside tests/support/pg_harness.sh: a database of its own in the
# run's cluster (the fixture pg_cluster starts it once, ctest stops it after
# the last user), or with PRIVATE a cluster of its own (for a test that stops
# or restarts the server). Labelled service.
function(sbx_add_pg_test)
  cmake_parse_arguments(T "PRIVATE" "NAME" "COMMAND" ${ARGN})
  if(T_PRIVATE)
    add_test(NAME ${T_NAME}
      COMMAND ${PROJECT_SOURCE_DIR}/tests/support/pg_harness.sh exec --private ${T_COMMAND})
  else()
    add_test(NAME ${T_NAME}
      COMMAND ${PROJECT_SOURCE_DIR}/tests/support/pg_harness.sh exec ${T_COMMAND})
    set_tests_properties(${T_NAME} PROPERTIES FIXTURES_REQUIRED pg_cluster
      ENVIRONMENT "SBX_TEST_PG_SHARED=${SBX_TEST_PG_SHARED_DIR}")
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS service)
endfunction()

# The fixture: defined once (tests/unit/CMakeLists.txt calls this).
function(sbx_add_pg_cluster_fixture)
  add_test(NAME pg_cluster_start
    COMMAND ${PROJECT_SOURCE_DIR}/tests/support/pg_harness.sh start ${SBX_TEST_PG_SHARED_DIR})
  add_test(NAME pg_cluster_stop
    COMMAND ${PROJECT_SOURCE_DIR}/tests/support/pg_harness.sh stop ${SBX_TEST_PG_SHARED_DIR})
  set_tests_properties(pg_cluster_start PROPERTIES FIXTURES_SETUP pg_cluster LABELS service
    TIMEOUT 60)
  set_tests_properties(pg_cluster_stop PROPERTIES FIXTURES_CLEANUP pg_cluster LABELS service
    TIMEOUT 60)
endfunction()

function(sbx_test_policy)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t ${tests})
    get_test_property(${t} LABELS labels)
    if(NOT labels)
      set(labels "")
    endif()
    if("engine" IN_LIST labels)
      set(class engine)
    elseif("service" IN_LIST labels)
      set(class service)
    elseif("fast" IN_LIST labels)
      set(class fast)
    elseif("runtime" IN_LIST labels)
      set(class engine)
    else()
      set(class fast)
    endif()
    list(REMOVE_ITEM labels unit runtime engine service fast slow)
    list(PREPEND labels ${class})
    # the timeout: measured x 3, else the class's default
    set(secs "")
    foreach(row ${SBX_TEST_SECONDS})
      if(row MATCHES "^${t}=([0-9]+)$")
        set(secs ${CMAKE_MATCH_1})
      endif()
    endforeach()
    if(secs STREQUAL "")
      set(timeout ${SBX_TEST_DEFAULT_TIMEOUT_${class}})
    else()
      math(EXPR timeout "${secs} * 3")
      if(timeout LESS 60)
        set(timeout 60)
      endif()
      if(secs GREATER 60)
        list(APPEND labels slow)
      endif()
    endif()
    set_tests_properties(${t} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout})
    # its scope: every sandbox it makes carries sbx.test=<name> (owner.h)
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "SBX_TEST_LABEL=${t}")
    if(t IN_LIST SBX_TEST_ALONE)
      set_tests_properties(${t} PROPERTIES RUN_SERIAL TRUE)
    endif()
  endforeach()
endfunction()
