# sbx_add_cmocka_test(<name> SOURCES ... [LINK_LIBRARIES ...] [LABELS ...])
function(sbx_add_cmocka_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LINK_LIBRARIES;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE PkgConfig::CMOCKA sbx_warnings ${T_LINK_LIBRARIES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_LABELS)
    set(T_LABELS fast)  # cmake/SbxTestPolicy.cmake
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${T_LABELS}"
    SKIP_RETURN_CODE 77
    ENVIRONMENT "SBX_PLUGIN_DIR=${CMAKE_BINARY_DIR}/plugins;SBX_SOURCE_DIR=${PROJECT_SOURCE_DIR};SBX_BUILD_DIR=${CMAKE_BINARY_DIR};SBX_POLICY_DIR=${PROJECT_SOURCE_DIR}/policies")
endfunction()
