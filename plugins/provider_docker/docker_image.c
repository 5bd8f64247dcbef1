/* docker_image.c - the image_build op: the core's helper builds (or takes
 * from its cache) the root filesystem and imports it into this instance's
 * engine (docs/image.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "docker.h"

#define DK_IMAGE_MAX_ARGS 400

/* Runs argv with stdout into out (its last line kept); returns the exit
 * status, 128+n for a signal, -1 when it could not be started. */
static int run_builder(char *const *argv, char *out, size_t size)
{
    char buf[4096];
    size_t got = 0;
    int status = 0;
    int pfd[2];
    pid_t pid;

    out[0] = '\0';
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(pfd[1], 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        ssize_t n = read(pfd[0], buf + got, sizeof(buf) - 1 - got);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
        if (got == sizeof(buf) - 1) {
            got = 0;
        }
    }
    close(pfd[0]);
    buf[got] = '\0';
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    buf[strcspn(buf, "\n")] = '\0';
    snprintf(out, size, "%s", buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int dk_image_build(void *ctx, const struct sbx_image_request *req, char *ref_out, size_t ref_size,
                   sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    char *argv[DK_IMAGE_MAX_ARGS];
    char docker_host[128];
    size_t n = 0;
    int rc;

    snprintf(docker_host, sizeof(docker_host), "unix://%s", c->socket);
    argv[n++] = (char *)req->builder;
    argv[n++] = "--repo";
    argv[n++] = (char *)req->repo;
    if (req->npm != NULL) {
        argv[n++] = "--npm";
        argv[n++] = (char *)req->npm;
    }
    argv[n++] = "--spec";
    argv[n++] = (char *)req->spec;
    argv[n++] = "--suite";
    argv[n++] = (char *)req->suite;
    argv[n++] = "--packages";
    argv[n++] = (char *)req->packages;
    argv[n++] = "--docker-host";
    argv[n++] = docker_host;
    argv[n++] = "--cache";
    argv[n++] = (char *)req->cache;
    for (size_t i = 0; req->changes != NULL && req->changes[i] != NULL; i++) {
        if (n + 3 > DK_IMAGE_MAX_ARGS) {
            return c->host->error_set(err, SBX_E_USAGE, "image build: more than %d changes",
                                      (DK_IMAGE_MAX_ARGS - 20) / 2);
        }
        argv[n++] = "--change";
        argv[n++] = (char *)req->changes[i];
    }
    for (size_t i = 0; req->options != NULL && req->options[i] != NULL; i++) {
        if (n + 2 > DK_IMAGE_MAX_ARGS) {
            return c->host->error_set(err, SBX_E_USAGE, "image build: more than %d options",
                                      DK_IMAGE_MAX_ARGS - 20);
        }
        argv[n++] = (char *)req->options[i];
    }
    argv[n] = NULL;
    rc = run_builder(argv, ref_out, ref_size);
    if (rc < 0) {
        return c->host->error_set(err, SBX_E_GENERIC, "image build: cannot run %s: %s",
                                  req->builder, strerror(errno));
    }
    if (rc == 2) {
        /* the helper's own refusal of a definition (it said why on stderr) */
        return c->host->error_set(err, SBX_E_CONFIG, "image build refused the definition");
    }
    if (rc != 0 || ref_out[0] == '\0') {
        return c->host->error_set(err, SBX_E_GENERIC, "image build failed (exit %d)", rc);
    }
    return 0;
}
