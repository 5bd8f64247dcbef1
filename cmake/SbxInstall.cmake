# What ships with sbx besides the binary, plugins and helpers, in FHS places
# under the prefix (docs/operations.md, "Install"), the same files in the build
# tree where the binary looks for them (util/paths.c), and the Debian package.
#
#   bin/sbx                               the binary
#   lib/sbx/plugins/*.so                  plugins (SBX_INSTALL_PLUGINDIR)
#   libexec/sbx/                          sbx-relay, sbx-image-build, sbx-image-sbom
#   share/sbx/policies/                   limits.lua, egress.lua, slots.lua (no tests)
#   share/sbx/devcontainer/               the warm image's definition
#   share/sbx/prometheus/sbx-rules.yml    alert rules
#   lib/systemd/system/sbx-serve.service  the runner's unit (ExecStart: this prefix's bin/sbx)
#   lib/sysusers.d/sbx.conf               the unit's group
#   share/doc/sbx/                        README.md, docs/*.md, openapi.yaml
#   share/man/man1/                       sbx.1, sbx-COMMAND.1 (scripts/gen-man.sh)
#   share/bash-completion/completions/sbx, share/zsh/{vendor-completions,site-functions}/_sbx

# The build tree mirrors share/sbx (links into the source tree), so build/sbx
# finds its policies and image definition the way an installed one does.
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/share/sbx)
file(CREATE_LINK ${PROJECT_SOURCE_DIR}/policies ${CMAKE_BINARY_DIR}/share/sbx/policies SYMBOLIC)
file(CREATE_LINK ${PROJECT_SOURCE_DIR}/.devcontainer ${CMAKE_BINARY_DIR}/share/sbx/devcontainer
     SYMBOLIC)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/policies/ DESTINATION ${CMAKE_INSTALL_DATADIR}/sbx/policies
        FILES_MATCHING PATTERN "*.lua" PATTERN "*_test.lua" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/.devcontainer/devcontainer.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/sbx/devcontainer)
install(FILES ${PROJECT_SOURCE_DIR}/docs/prometheus/sbx-rules.yml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/sbx/prometheus)

configure_file(${PROJECT_SOURCE_DIR}/scripts/sbx-serve.service.in
               ${CMAKE_BINARY_DIR}/sbx-serve.service @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sbx-serve.service DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/scripts/sbx.sysusers DESTINATION lib/sysusers.d RENAME sbx.conf)

file(GLOB SBX_DOC_FILES ${PROJECT_SOURCE_DIR}/docs/*.md ${PROJECT_SOURCE_DIR}/docs/openapi.yaml)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${SBX_DOC_FILES} DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Man pages: help2man from the binary's own --help (scripts/gen-man.sh), at
# every build that changes the binary, so they stay true to it.
option(SBX_MAN "Generate the man pages with help2man" ON)
if(SBX_MAN)
  find_program(SBX_HELP2MAN help2man)
  if(NOT SBX_HELP2MAN)
    message(FATAL_ERROR "help2man not found: install Debian package 'help2man' "
                        "(scripts/setup.sh does), or configure with -DSBX_MAN=OFF")
  endif()
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/man/sbx.1
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${CMAKE_BINARY_DIR}/man
    COMMAND ${PROJECT_SOURCE_DIR}/scripts/gen-man.sh $<TARGET_FILE:sbx> ${CMAKE_BINARY_DIR}/man
            ${PROJECT_VERSION}
    DEPENDS sbx ${PROJECT_SOURCE_DIR}/scripts/gen-man.sh
    COMMENT "Generating the man pages (help2man)" VERBATIM)
  add_custom_target(sbx_man ALL DEPENDS ${CMAKE_BINARY_DIR}/man/sbx.1)
  install(DIRECTORY ${CMAKE_BINARY_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
          FILES_MATCHING PATTERN "*.1")
endif()

# Shell completion (completion/): the words come from sbx itself at each TAB.
install(FILES ${PROJECT_SOURCE_DIR}/completion/sbx.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME sbx)
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(SBX_ZSH_DIR ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)  # Debian's for packages
else()
  set(SBX_ZSH_DIR ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/completion/_sbx DESTINATION ${SBX_ZSH_DIR})

# The Debian package: scripts/package.sh (cpack -G DEB from a build with prefix /usr).
set(CPACK_PACKAGE_NAME sbx)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "stackra-sandbox maintainers <sbx@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "runs agent tasks and CI jobs in fresh, limited, egress-filtered sandboxes")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "docker.io, debootstrap, ca-certificates, iproute2, iptables, python3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "bash-completion")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/scripts/debian/postinst ${PROJECT_SOURCE_DIR}/scripts/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_GENERATOR DEB)
include(CPack)
