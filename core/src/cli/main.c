/* main.c - the sbx binary: everything is in libsbx. */
#include "cli/cli.h"

int main(int argc, char **argv)
{
    return sbx_cli_main(argc, argv);
}
