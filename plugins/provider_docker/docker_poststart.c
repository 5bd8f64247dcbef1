/* docker_poststart.c - devcontainer.json's postStartCommand at each sandbox
 * start: `sbx image build` bakes it into the image as a script and names it
 * in the image's label dev.sbx.post-start (docs/image.md); the sandbox is
 * ready only once it has run and succeeded. (added) The image's label
 * dev.sbx.remote-ids for updateRemoteUserUID (dk_remote_ids). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"

#define DK_POST_START_LABEL "dev.sbx.post-start"
#define DK_POST_START_DIR "/opt/sbx-devc/"

struct tail {
    char buf[512];
    size_t len;
};

/* Keeps the last bytes of the command's output for the error message. */
static int keep_tail(void *ud, int stream, const char *data, size_t len)
{
    struct tail *t = ud;

    (void)stream;
    for (size_t i = 0; i < len; i++) {
        if (t->len == sizeof(t->buf) - 1) {
            memmove(t->buf, t->buf + 1, t->len - 1);
            t->len--;
        }
        t->buf[t->len++] = data[i] == '\n' || (unsigned char)data[i] < 0x20 ? ' ' : data[i];
    }
    t->buf[t->len] = '\0';
    return 0;
}

/* The script the image's label names, or NULL (none, or not sbx's). */
static char *post_start_of(struct dk_ctx *c, const char *image, sbx_error_t **err, int *failed)
{
    char *enc = sbx_url_escape(image);
    char path[512];
    json_t *reply = NULL;
    long status = 0;
    const char *v;
    char *out = NULL;

    *failed = 0;
    snprintf(path, sizeof(path), "/images/%s/json", enc);
    free(enc);
    if (dk_request(c, "GET", path, NULL, &status, &reply, err) < 0) {
        *failed = 1;
        return NULL;
    }
    v = json_string_value(json_object_get(
        json_object_get(json_object_get(reply, "Config"), "Labels"), DK_POST_START_LABEL));
    if (status == 200 && v != NULL &&
        strncmp(v, DK_POST_START_DIR, strlen(DK_POST_START_DIR)) == 0 && strstr(v, "..") == NULL &&
        strlen(v) < 200) {
        out = xstrdup(v);
    }
    json_decref(reply);
    return out;
}

int dk_post_start(struct dk_ctx *c, const char *id, const char *image, sbx_error_t **err)
{
    struct tail t = {.len = 0};
    int failed = 0;
    char *script = post_start_of(c, image, err, &failed);
    const char *argv[] = {"/bin/sh", script, NULL};
    struct sbx_exec_spec spec = {.argv = argv, .on_output = keep_tail, .output_userdata = &t};
    int code = 0;

    if (script == NULL) {
        return failed ? -1 : 0;
    }
    if (dk_exec(c, id, &spec, NULL, &code, err) < 0) {
        free(script);
        return -1;
    }
    free(script);
    if (code != 0) {
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "docker: image %s: postStartCommand failed (exit %d): %s", image,
                                  code, t.buf);
    }
    return 0;
}

/* (added) updateRemoteUserUID (docs/image.md): "UID:GID" of the label
 * dev.sbx.remote-ids, each 1..DK_REMOTE_ID_MAX; else 0:0 (none, or not
 * sbx's). The label is the image's, so it is bounded and only ever names an
 * id inside the sandbox. */
#define DK_REMOTE_IDS_LABEL "dev.sbx.remote-ids"
#define DK_REMOTE_ID_MAX 65535

static void parse_ids(const char *v, unsigned *uid, unsigned *gid)
{
    unsigned long u = 0;
    unsigned long g = 0;
    char *end = NULL;

    *uid = 0;
    *gid = 0;
    if (v == NULL || *v < '0' || *v > '9') {
        return;
    }
    u = strtoul(v, &end, 10);
    if (*end != ':' || end[1] < '0' || end[1] > '9') {
        return;
    }
    g = strtoul(end + 1, &end, 10);
    if (*end != '\0' || u == 0 || u > DK_REMOTE_ID_MAX || g > DK_REMOTE_ID_MAX) {
        return;
    }
    *uid = (unsigned)u;
    *gid = (unsigned)g;
}

void dk_remote_ids(struct dk_ctx *c, const char *image, const char *container, unsigned *uid,
                   unsigned *gid)
{
    char *enc;
    char path[512];
    json_t *reply = NULL;
    long status = 0;
    sbx_error_t *err = NULL;
    char img[160] = "";

    *uid = 0;
    *gid = 0;
    if (image == NULL && container != NULL) {
        /* a warm sandbox's claim: the image it was made of */
        enc = sbx_url_escape(container);
        snprintf(path, sizeof(path), "/containers/%s/json", enc ? enc : "");
        free(enc);
        if (dk_request(c, "GET", path, NULL, &status, &reply, &err) == 0 && status == 200) {
            snprintf(img, sizeof(img), "%s",
                     json_string_value(json_object_get(reply, "Image")) ?: "");
        }
        json_decref(reply);
        reply = NULL;
        c->host->error_free(&err);
        image = img[0] ? img : NULL;
    }
    if (image == NULL) {
        return;
    }
    enc = sbx_url_escape(image);
    snprintf(path, sizeof(path), "/images/%s/json", enc ? enc : "");
    free(enc);
    if (dk_request(c, "GET", path, NULL, &status, &reply, &err) == 0 && status == 200) {
        parse_ids(
            json_string_value(json_object_get(
                json_object_get(json_object_get(reply, "Config"), "Labels"), DK_REMOTE_IDS_LABEL)),
            uid, gid);
    }
    json_decref(reply);
    c->host->error_free(&err);
}
