# Build options. SBX_SANITIZE=address,undefined applies sanitizers to every target.
option(SBX_BUILD_TESTS "Build the cmocka test suite" ON)
option(SBX_WERROR "Treat warnings as errors" OFF)
set(SBX_SANITIZE "" CACHE STRING "Sanitizers, e.g. address,undefined")

add_compile_definitions(_GNU_SOURCE)
add_library(sbx_warnings INTERFACE)
target_compile_options(sbx_warnings INTERFACE
  -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes -Wvla
  -Wno-format-nonliteral $<$<BOOL:${SBX_WERROR}>:-Werror>)

if(SBX_SANITIZE)
  add_compile_options(-fsanitize=${SBX_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${SBX_SANITIZE})
endif()

if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE RelWithDebInfo)
endif()

# sbx_plugin_option(NAME DEFAULT): gate a plugin, fluent-bit style.
macro(sbx_plugin_option name default)
  option(SBX_PLUGIN_${name} "Build plugin ${name}" ${default})
endmacro()
