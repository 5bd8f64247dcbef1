/* boxinfo.c - what sandbox_queue shows of the whole box in embedded mode:
 * its slot locks and the tasks holding sandboxes, from every sbx process
 * (sbx run, task keepers, other sbx mcp). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "mcp/backend.h"
#include "sandbox/statedir.h"
#include "util/xalloc.h"

/* A slot is taken while someone holds its flock; the probe's shared lock
 * is dropped at once. */
static int slots_used(const char *state, int max)
{
    int used = 0;

    for (int i = 0; i < max; i++) {
        char *path = xasprintf("%s/slots/%d.lock", state, i);
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        free(path);
        if (fd < 0) {
            continue;
        }
        if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
            used++;
        }
        close(fd);
    }
    return used;
}

/* Records of tasks starting or running (a process killed with -9 leaves
 * one until the next task start on the box reaps its sandbox). */
static json_t *holders(const char *state)
{
    char *dir = xasprintf("%s/tasks", state);
    json_t *arr = json_array();
    DIR *d = opendir(dir);
    struct dirent *de;

    while (d != NULL && (de = readdir(d)) != NULL) {
        char *path;
        json_t *rec;
        const char *st;

        if (!sbx_id_valid(de->d_name, SBX_ID_TASK)) {
            continue;
        }
        path = xasprintf("%s/%s/task.json", dir, de->d_name);
        rec = json_load_file(path, 0, NULL);
        free(path);
        st = json_string_value(json_object_get(rec, "state"));
        if (st != NULL && (strcmp(st, "running") == 0 || strcmp(st, "starting") == 0)) {
            json_array_append_new(arr, json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?}", "task",
                                                 json_object_get(rec, "task"), "pool",
                                                 json_object_get(rec, "pool"), "state",
                                                 json_object_get(rec, "state"), "provider",
                                                 json_object_get(rec, "provider"), "started_at",
                                                 json_object_get(rec, "started_at")));
        }
        json_decref(rec);
    }
    if (d != NULL) {
        closedir(d);
    }
    free(dir);
    return arr;
}

json_t *sbx_mcp_box_slots(const char *state, int max)
{
    return json_pack("{s:i, s:i, s:o}", "max", max, "used", slots_used(state, max), "holders",
                     holders(state));
}
