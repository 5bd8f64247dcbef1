/* keeper_client.c - where a client finds the runner that hosts a kept task (its
 * keeper's, issue 31): <state>/tasks/ID/runner/runner.sock, or a link there to a
 * directory with a shorter path. */
#include <stdlib.h>
#include <unistd.h>

#include "sandbox/keeper.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

char *sbx_keeper_runner_socket(const char *state, const char *task)
{
    cleanup_free char *link = NULL;
    char *dir;
    char *sock;

    if (!sbx_id_valid(task, SBX_ID_TASK)) {
        return NULL;
    }
    link = xasprintf("%s/tasks/%s/runner", state, task);
    dir = realpath(link, NULL); /* a long state path: a link to a shorter one */
    if (dir == NULL) {
        return NULL;
    }
    sock = xasprintf("%s/runner.sock", dir);
    free(dir);
    if (access(sock, F_OK) < 0) {
        free(sock);
        return NULL;
    }
    return sock;
}
