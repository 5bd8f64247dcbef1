# Build options. SBX_SANITIZE=address,undefined applies sanitizers to every target.
option(SBX_BUILD_TESTS "Build the cmocka test suite" ON)
option(SBX_WERROR "Treat warnings as errors" OFF)
set(SBX_SANITIZE "" CACHE STRING "Sanitizers, e.g. address,undefined")
# Where plugins install, relative to the prefix (the binary finds them relative to itself).
set(SBX_INSTALL_PLUGINDIR "lib/sbx/plugins" CACHE STRING "Plugin directory under the prefix")

add_compile_definitions(_GNU_SOURCE)
add_library(sbx_warnings INTERFACE)
target_compile_options(sbx_warnings INTERFACE
  -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes -Wvla
  -Wno-format-nonliteral $<$<BOOL:${SBX_WERROR}>:-Werror>)

if(SBX_SANITIZE)
  add_compile_options(-fsanitize=${SBX_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${SBX_SANITIZE})
endif()

# SBX_FUZZ=ON builds the libFuzzer harnesses of fuzz/ (clang only; scripts/fuzz.sh):
# every target gets coverage instrumentation, the harnesses link libFuzzer.
option(SBX_FUZZ "Build the libFuzzer harnesses in fuzz/ (clang)" OFF)
if(SBX_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SBX_FUZZ=ON needs clang (cmake -DCMAKE_C_COMPILER=clang)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE RelWithDebInfo)
endif()

# sbx_plugin_option(NAME DEFAULT): gate a plugin, fluent-bit style.
macro(sbx_plugin_option name default)
  option(SBX_PLUGIN_${name} "Build plugin ${name}" ${default})
endmacro()
