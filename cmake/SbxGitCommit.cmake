# Run at every build (cmake -P): writes OUT (sbx_commit.h) with the git commit of
# SRC, rewriting it only when it changed, so a new commit rebuilds one file.
# Outside a git checkout (a source tarball) the commit is $SBX_GIT_COMMIT, else "unknown".
set(commit "unknown")
if(DEFINED ENV{SBX_GIT_COMMIT} AND NOT "$ENV{SBX_GIT_COMMIT}" STREQUAL "")
  set(commit "$ENV{SBX_GIT_COMMIT}")
else()
  find_program(GIT git)
  if(GIT)
    execute_process(COMMAND ${GIT} -C ${SRC} rev-parse --short=12 HEAD
                    OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND out MATCHES "^[0-9a-f]+$")
      set(commit "${out}")
      execute_process(COMMAND ${GIT} -C ${SRC} status --porcelain --untracked-files=no
                      OUTPUT_VARIABLE dirty ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(NOT dirty STREQUAL "")
        string(APPEND commit "-dirty")
      endif()
    endif()
  endif()
endif()
set(text "/* sbx_commit.h - generated at build time by cmake/SbxGitCommit.cmake. */\n#define SBX_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
