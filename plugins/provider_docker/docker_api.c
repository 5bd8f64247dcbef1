/* docker_api.c - requests to the Docker Engine API and version negotiation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "docker.h"

int64_t dk_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *dk_reply_message(json_t *reply)
{
    const char *m = json_string_value(json_object_get(reply, "message"));

    return m ? m : "no message";
}

/* path is relative to the version prefix ("/containers/json"), or absolute
 * when it starts with "//" (unversioned, for /version). */
int dk_request(struct dk_ctx *c, const char *method, const char *path, json_t *body, long *status,
               json_t **reply, sbx_error_t **err)
{
    static const char *const json_hdr[] = {"Content-Type: application/json", NULL};
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    char url[2048];
    char *text = NULL;
    int r;

    if (path[0] == '/' && path[1] == '/') {
        snprintf(url, sizeof(url), "http://localhost%s", path + 1);
    }
    else {
        snprintf(url, sizeof(url), "http://localhost/%s%s", c->api, path);
    }
    if (body != NULL) {
        text = json_dumps(body, JSON_COMPACT);
        req.body = text;
        req.body_len = strlen(text);
        req.headers = json_hdr;
    }
    req.method = method;
    req.url = url;
    req.unix_socket = c->socket;
    req.timeout_ms = 120000;
    r = c->host->http(&req, &resp, err);
    if (text != NULL) {
        free(text);
    }
    if (r < 0) {
        return c->host->error_wrap(err, "docker engine at %s", c->socket);
    }
    *status = resp.status;
    if (reply != NULL) {
        json_error_t jerr;

        *reply = NULL;
        if (resp.body_len > 0) {
            *reply = json_loadb(resp.body, resp.body_len, 0, &jerr);
            if (*reply == NULL && resp.status < 300) {
                r = c->host->error_set(err, SBX_E_PROTOCOL,
                                       "docker %s %s: malformed JSON reply "
                                       "(%s)",
                                       method, path, jerr.text);
            }
        }
        if (*reply == NULL && r == 0) {
            /* error bodies may be plain text */
            *reply = json_pack("{s:s%}", "message", resp.body ? resp.body : "",
                               resp.body ? strcspn(resp.body, "\n") : 0);
        }
    }
    c->host->http_response_free(&resp);
    return r;
}

int dk_raw(struct dk_ctx *c, const char *socket, const char *method, const char *path,
           const char *body, size_t len, const char *ctype, long timeout_ms,
           struct sbx_http_response *resp, sbx_error_t **err)
{
    const char *hdr[] = {NULL, NULL};
    struct sbx_http_request req = {0};
    char url[1024];
    char ct[128];

    snprintf(url, sizeof(url), "http://localhost%s", path);
    if (ctype != NULL) {
        snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
        hdr[0] = ct;
        req.headers = hdr;
    }
    req.method = method;
    req.url = url;
    req.unix_socket = socket ? socket : c->socket;
    req.body = body;
    req.body_len = len;
    req.timeout_ms = timeout_ms;
    req.connect_timeout_ms = 2000;
    return c->host->http(&req, resp, err);
}

static int parse_minor(const char *v)
{
    int major = 0;
    int minor = 0;

    if (v == NULL || sscanf(v, "%d.%d", &major, &minor) != 2 || major != 1) {
        return -1;
    }
    return minor;
}

int dk_negotiate(struct dk_ctx *c, sbx_error_t **err)
{
    json_t *reply = NULL;
    json_t *info = NULL;
    long status = 0;
    int max;
    int min;
    int use;

    if (dk_request(c, "GET", "//version", NULL, &status, &reply, err) < 0) {
        return c->host->error_wrap(err, "is the engine running? (scripts/dockerd.sh start)");
    }
    if (status != 200) {
        c->host->error_set(err, SBX_E_ENGINE, "docker GET /version: HTTP %ld: %s", status,
                           dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    max = parse_minor(json_string_value(json_object_get(reply, "ApiVersion")));
    min = parse_minor(json_string_value(json_object_get(reply, "MinAPIVersion")));
    if (max < 0) {
        c->host->error_set(err, SBX_E_PROTOCOL, "docker GET /version: no usable ApiVersion");
        json_decref(reply);
        return -1;
    }
    use = max > DK_MAX_API_MINOR ? DK_MAX_API_MINOR : max;
    if (use < DK_MIN_API_MINOR || (min > 0 && use < min)) {
        c->host->error_set(err, SBX_E_ENGINE,
                           "docker engine speaks API %s1.%d; sbx needs "
                           "1.%d..1.%d",
                           min > 0 ? "from a minimum above it up to " : "up to ", max,
                           DK_MIN_API_MINOR, DK_MAX_API_MINOR);
        json_decref(reply);
        return -1;
    }
    snprintf(c->api, sizeof(c->api), "v1.%d", use);
    snprintf(c->engine, sizeof(c->engine), "docker %s (API 1.%d)",
             json_string_value(json_object_get(reply, "Version")) ?: "?", use);
    json_decref(reply);

    /* user namespaces and the storage driver */
    if (dk_request(c, "GET", "/info", NULL, &status, &info, err) < 0) {
        return -1;
    }
    if (status == 200) {
        json_t *sec = json_object_get(info, "SecurityOptions");
        json_t *ds = json_object_get(info, "DriverStatus");
        size_t i;
        json_t *v;

        c->userns = 0;
        json_array_foreach(sec, i, v)
        {
            const char *s = json_string_value(v);

            if (s != NULL && strstr(s, "name=userns") != NULL) {
                c->userns = 1;
            }
        }
        {
            /* under userns-remap the data root ends in "<uid>.<gid>" */
            const char *root = json_string_value(json_object_get(info, "DockerRootDir"));
            const char *base = root ? strrchr(root, '/') : NULL;

            if (c->userns && base != NULL &&
                sscanf(base + 1, "%u.%u", &c->remap_uid, &c->remap_gid) != 2) {
                c->remap_uid = 0;
                c->remap_gid = 0;
            }
        }
        snprintf(c->storage_driver, sizeof(c->storage_driver), "%s",
                 json_string_value(json_object_get(info, "Driver")) ?: "");
        /* (added) stale btrfs qgroups go after removals (docker_qgroup.c) */
        dk_qgroup_setup(c, json_string_value(json_object_get(info, "DockerRootDir")));
        json_array_foreach(ds, i, v)
        {
            const char *k = json_string_value(json_array_get(v, 0));

            if (k != NULL && strcmp(k, "Backing Filesystem") == 0) {
                snprintf(c->backing_fs, sizeof(c->backing_fs), "%s",
                         json_string_value(json_array_get(v, 1)) ?: "");
            }
        }
    }
    json_decref(info);
    return 0;
}

pid_t dk_init_pid(struct dk_ctx *c, const char *id)
{
    json_t *reply = NULL;
    long status = 0;
    char path[256];
    sbx_error_t *err = NULL;
    pid_t pid = 0;

    snprintf(path, sizeof(path), "/containers/%s/json", id);
    if (dk_request(c, "GET", path, NULL, &status, &reply, &err) < 0) {
        c->host->error_free(&err);
        return 0;
    }
    if (status == 200) {
        pid = (pid_t)json_integer_value(json_object_get(json_object_get(reply, "State"), "Pid"));
    }
    json_decref(reply);
    return pid;
}
