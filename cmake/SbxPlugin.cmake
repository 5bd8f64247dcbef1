# sbx_add_plugin(<kind>_<name> SOURCES ... [LIBS ...])
# A MODULE with hidden visibility, -Wl,--no-undefined, only the SDK on its
# include path, the SDK helper library (sbx_sdk_util) linked in, written to ${CMAKE_BINARY_DIR}/plugins/<name>.so.
function(sbx_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS;DEFINES" ${ARGN})
  add_library(${name} MODULE ${P_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    C_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/plugins)
  target_link_libraries(${name} PRIVATE sbx_sdk sbx_sdk_util sbx_warnings ${P_LIBS})
  target_link_options(${name} PRIVATE -Wl,--no-undefined)
  if(P_DEFINES)
    target_compile_definitions(${name} PRIVATE ${P_DEFINES})
  endif()
  install(TARGETS ${name} LIBRARY DESTINATION ${SBX_INSTALL_PLUGINDIR})
endfunction()
