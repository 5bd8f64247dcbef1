/* main.c - the sbx binary: everything is in libsbx but the git commit it was
 * built from, so that a new commit relinks this binary only, not every test
 * program that links libsbx (those say "unknown": cmd_version.c). */
#include "cli/cli.h"
#include "sbx_commit.h"

const char sbx_git_commit[] = SBX_GIT_COMMIT;

int main(int argc, char **argv)
{
    return sbx_cli_main(argc, argv);
}
