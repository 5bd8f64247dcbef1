/* cmd_job.c - `sbx job` and `sbx queue`: clients of the runner. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "sandbox/statedir.h"
#include "http/http.h"
#include "runner/runner.h"
#include "util/units.h"
#include "util/xalloc.h"

void sbx_cmd_job_help(FILE *out)
{
    fprintf(out, "usage: sbx job ID [--json] [--follow] [--egress]\n"
                 "\n"
                 "  --json        print the runner's job record as JSON\n"
                 "  -f, --follow  stream the job's output until it ends\n"
                 "  --egress      print the job's egress log lines\n"
                 "\n"
                 "Shows a job's record (id, task, pool, class, provider, image, state, timings,\n"
                 "exit status, reason, egress summary, credential lease ids, env names).\n"
                 "--follow streams the job's output until it ends, its stdout to stdout and its\n"
                 "stderr to stderr, and exits with the job's exit status.\n"
                 "--egress prints the job's egress log lines (one JSON line per connection,\n"
                 "from egress.log, else <state dir>/egress.log); it needs no runner.\n"
                 "\n"
                 "Exit status: 0 shown; 1 unknown job or runner down; 2 usage. With --follow:\n"
                 "the job's own status, 125 when it ended without one (cancelled, interrupted,\n"
                 "sbx failure) or the runner is not reachable.\n");
}

void sbx_cmd_queue_help(FILE *out)
{
    fprintf(out, "usage: sbx queue [--json]\n"
                 "\n"
                 "  --json   print the runner's queue as JSON (GET /v1/queue)\n"
                 "\n"
                 "Shows the runner's queue per pool: its length, each waiting job's wait so\n"
                 "far, the holder of each slot (job, task, since when), the heavy slot (and why\n"
                 "this box takes no heavy jobs), the autoscaler and the spend caps.\n"
                 "\n"
                 "Exit status: 0 shown; 1 the runner is not reachable; 2 usage.\n");
}

/* The job's stdout to ours, its stderr to ours. */
static int to_fd(void *ud, int stream, const char *data, size_t len)
{
    FILE *f = stream == 2 ? stderr : stdout;

    (void)ud;
    fwrite(data, 1, len, f);
    fflush(f);
    return 0;
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));

    return s ? s : "-";
}

static void when(json_t *v, char *buf, size_t len)
{
    time_t t;
    struct tm tm;

    if (!json_is_number(v)) {
        snprintf(buf, len, "-");
        return;
    }
    t = (time_t)json_number_value(v);
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void print_job(json_t *o)
{
    json_t *tm = json_object_get(o, "timings");
    json_t *es = json_object_get(o, "exit_status");
    char q[32], g[32], r[32], f[32];

    when(json_object_get(tm, "queued_at"), q, sizeof(q));
    when(json_object_get(tm, "granted_at"), g, sizeof(g));
    when(json_object_get(tm, "ready_at"), r, sizeof(r));
    when(json_object_get(tm, "finished_at"), f, sizeof(f));
    printf("job %s  task %s  pool %s  class %s  state %s\n", str(o, "id"), str(o, "task"),
           str(o, "pool"), str(o, "class"), str(o, "state"));
    printf("  provider %s  image %s\n", str(o, "provider"), str(o, "image"));
    printf("  queued %s  slot %s  ready %s  finished %s\n", q, g, r, f);
    if (json_is_integer(es)) {
        printf("  exit status %lld\n", (long long)json_integer_value(es));
    }
    if (json_is_string(json_object_get(o, "reason"))) {
        printf("  reason: %s\n", str(o, "reason"));
    }
}

/* The egress log lines of one job (docs/egress.md): read straight from the
 * log file, so they are there for embedded tasks and runner jobs alike. */
static int print_egress(struct sbx_config *cfg, const char *id)
{
    sbx_error_t *err = NULL;
    char *state = NULL;
    char *path;
    char *want;
    char *line = NULL;
    size_t cap = 0;
    FILE *f;
    int n = 0;

    if (cfg->egress.log != NULL) {
        path = xstrdup(cfg->egress.log);
    }
    else {
        state = sbx_state_dir(cfg->state_dir, &err);
        if (state == NULL) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
            return SBX_EXIT_FAIL;
        }
        path = xasprintf("%s/egress.log", state);
    }
    f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "sbx: error: job: cannot read the egress log %s\n", path);
        free(path);
        free(state);
        return SBX_EXIT_FAIL;
    }
    want = xasprintf("\"job\":\"%s\"", id);
    while (getline(&line, &cap, f) > 0) {
        if (strstr(line, want) != NULL) {
            fputs(line, stdout);
            n++;
        }
    }
    fclose(f);
    free(line);
    free(want);
    free(path);
    free(state);
    if (n == 0) {
        fprintf(stderr, "sbx: job %s: no egress log lines\n", id);
    }
    return SBX_EXIT_OK;
}

int sbx_cmd_job(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_config *cfg;
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    const char *id = NULL;
    int json = 0;
    int follow = 0;
    int egress = 0;
    char *path;
    json_t *o;
    int rc = SBX_EXIT_OK;
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"follow", no_argument, NULL, 'f'},
                                         {"egress", no_argument, NULL, 'e'},
                                         {NULL, 0, NULL, 0}};
    struct sbx_args a = {.cmd = "job", .opts = opts, .shortopts = "f", .argc = argc, .argv = argv};
    int c;

    while ((c = sbx_args_next(&a)) != -1) {
        if (c == 'j') {
            json = 1;
        }
        else if (c == 'f') {
            follow = 1;
        }
        else if (c == 'e') {
            egress = 1;
        }
        else {
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, 1, 1, "the job ID") < 0) {
        return SBX_EXIT_USAGE;
    }
    id = a.argv[optind];
    if (strlen(id) == 0 || strlen(id) > 63 ||
        strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") !=
            strlen(id)) {
        fprintf(stderr, "sbx: error: job: '%.80s' is not a job id (see 'sbx job --help')\n", id);
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        return SBX_EXIT_USAGE;
    }
    if (egress) {
        return print_egress(cfg, id);
    }
    if (follow) {
        if (sbx_runner_follow(cfg, id, to_fd, NULL, NULL, NULL, &err) < 0) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
            return SBX_EXIT_SBX;
        }
        fflush(stdout);
    }
    path = xasprintf("/v1/jobs/%s", id);
    if (sbx_runner_call(cfg, "GET", path, NULL, NULL, NULL, &resp, &err) < 0) {
        free(path);
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return follow ? SBX_EXIT_SBX : SBX_EXIT_FAIL;
    }
    free(path);
    o = json_loadb(resp.body, resp.body_len, 0, NULL);
    if (json && !follow) {
        printf("%s", resp.body);
    }
    else if (!follow) {
        print_job(o);
    }
    else {
        json_t *es = json_object_get(o, "exit_status");

        rc = json_is_integer(es) && json_integer_value(es) >= 0 ? (int)json_integer_value(es)
                                                                : SBX_EXIT_SBX;
        if (!json_is_integer(es)) {
            fprintf(stderr, "sbx: job %s %s%s%s\n", id, str(o, "state"),
                    json_is_string(json_object_get(o, "reason")) ? ": " : "",
                    json_is_string(json_object_get(o, "reason")) ? str(o, "reason") : "");
        }
    }
    json_decref(o);
    sbx_http_response_free(&resp);
    return rc;
}

/* A fleet box's view of every box and the shared queue (docs/runner.md,
 * "Several boxes"); nothing on one box. */
static void print_fleet(json_t *fl)
{
    json_t *b;
    json_t *e;
    const char *pool;
    size_t i, k;

    if (!json_is_object(fl)) {
        return;
    }
    if (json_is_string(json_object_get(fl, "error"))) {
        printf("\nfleet: %s\n", str(fl, "error"));
        return;
    }
    printf("\nfleet: %zu box(es); this is %s; leader (autoscaler) %s\n",
           json_array_size(json_object_get(fl, "boxes")), str(fl, "box"),
           json_is_string(json_object_get(fl, "leader")) ? str(fl, "leader") : "none");
    json_array_foreach(json_object_get(fl, "boxes"), i, b)
    {
        char *pools = json_dumps(json_object_get(b, "pools"), JSON_COMPACT);
        json_t *cap = json_object_get(b, "capacity");

        printf("  %s %s pools %s, %.1f CPUs, %.1fG, heartbeat %.1fs ago, %zu job(s), %s\n",
               str(b, "id"), json_is_true(json_object_get(b, "alive")) ? "up" : "LOST",
               pools ? pools : "[]", json_number_value(json_object_get(cap, "cpus")),
               json_number_value(json_object_get(cap, "memory")) / (1024.0 * 1024 * 1024),
               json_number_value(json_object_get(b, "heartbeat_age")),
               json_array_size(json_object_get(b, "holds")), str(b, "api"));
        free(pools);
        json_array_foreach(json_object_get(b, "holds"), k, e)
        {
            printf("    %s %s job %s (%s) %.0fs\n", str(e, "pool"), str(e, "class"), str(e, "job"),
                   str(e, "state"), json_number_value(json_object_get(e, "held_for")));
        }
    }
    json_object_foreach(json_object_get(fl, "queue"), pool, e)
    {
        printf("  shared queue %s: %lld waiting, oldest %.0fs\n", pool,
               (long long)json_integer_value(json_object_get(e, "queued")),
               json_number_value(json_object_get(e, "oldest_wait")));
    }
}

static void print_queue(json_t *q)
{
    json_t *box = json_object_get(q, "box");
    json_t *as = json_object_get(q, "autoscaler");
    json_t *p;
    size_t i;

    printf("box: %.1f CPUs, %.1fG memory, max %lld sandboxes%s\n",
           json_number_value(json_object_get(box, "cpus")),
           json_number_value(json_object_get(box, "memory")) / (1024.0 * 1024 * 1024),
           (long long)json_integer_value(json_object_get(box, "max_sandboxes")),
           json_is_true(json_object_get(box, "draining")) ? " (draining)" : "");
    if (json_is_false(json_object_get(json_object_get(box, "image"), "ready"))) { /* (added) */
        printf("box not ready, no job starts: %s\n",
               str(json_object_get(box, "image"), "waiting_for"));
    }
    if (!json_is_true(json_object_get(box, "heavy_allowed"))) {
        printf("heavy jobs: refused on this box: %s\n", str(box, "heavy_refusal"));
    }
    printf("autoscaler: %lld of max %lld paid box(es); spend $%.2f of $%.2f today, "
           "$%.2f of $%.2f this month\n",
           (long long)json_integer_value(json_object_get(as, "paid_boxes")),
           (long long)json_integer_value(json_object_get(as, "max_boxes")),
           json_number_value(json_object_get(as, "spend_day")),
           json_number_value(json_object_get(as, "spend_day_cap")),
           json_number_value(json_object_get(as, "spend_month")),
           json_number_value(json_object_get(as, "spend_month_cap")));
    json_array_foreach(json_object_get(q, "pools"), i, p)
    {
        json_t *e;
        size_t k;
        json_t *scale = json_object_get(p, "autoscale");

        printf("\npool %s: %lld queued (oldest waited %.0fs), %lld/%lld slots busy, heavy slot "
               "%s, %lld box(es)\n",
               str(p, "pool"), (long long)json_integer_value(json_object_get(p, "queue_length")),
               json_number_value(json_object_get(p, "oldest_wait")),
               (long long)json_integer_value(json_object_get(p, "running")),
               (long long)json_integer_value(json_object_get(p, "max_sandboxes")),
               str(p, "heavy_slot"), (long long)json_integer_value(json_object_get(p, "boxes")));
        if (json_is_string(json_object_get(scale, "reason"))) {
            printf("  autoscaler: %s\n", str(scale, "reason"));
        }
        {
            /* (added) the pool's warm sandboxes (docs/runner.md, Warm pool) */
            json_t *w = json_object_get(json_object_get(q, "warm"), str(p, "pool"));
            json_int_t want = json_integer_value(json_object_get(w, "wanted"));
            json_int_t refills = json_integer_value(json_object_get(w, "refills"));

            if (want > 0) {
                printf("  warm: %lld of %lld ready, %lld starting; %lld claims, %lld misses, "
                       "refill %.1fs mean (%lld)\n",
                       (long long)json_integer_value(json_object_get(w, "ready")), (long long)want,
                       (long long)json_integer_value(json_object_get(w, "starting")),
                       (long long)json_integer_value(json_object_get(w, "claims")),
                       (long long)json_integer_value(json_object_get(w, "misses")),
                       refills > 0 ? json_number_value(json_object_get(w, "refill_seconds_sum")) /
                                         (double)refills
                                   : 0.0,
                       (long long)refills);
            }
        }
        json_array_foreach(json_object_get(p, "slots"), k, e)
        {
            char since[32];

            if (strcmp(str(e, "state"), "busy") != 0) {
                printf("  slot %lld: idle\n",
                       (long long)json_integer_value(json_object_get(e, "index")));
                continue;
            }
            when(json_object_get(e, "since"), since, sizeof(since));
            printf("  slot %lld: %s job %s task %s since %s (%.0fs)\n",
                   (long long)json_integer_value(json_object_get(e, "index")), str(e, "class"),
                   str(e, "job"), str(e, "task"), since,
                   json_number_value(json_object_get(e, "held_for")));
        }
        json_array_foreach(json_object_get(p, "queued"), k, e)
        {
            printf("  waiting: %s job %s task %s, %.0fs so far%s\n", str(e, "class"), str(e, "id"),
                   str(e, "task"), json_number_value(json_object_get(e, "wait")),
                   json_is_true(json_object_get(e, "alerted")) ? " (alerted)" : "");
        }
    }
    print_fleet(json_object_get(q, "fleet"));
}

int sbx_cmd_queue(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_config *cfg;
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    int json = 0;
    json_t *q;
    struct sbx_args a = {.cmd = "queue", .argc = argc, .argv = argv};

    if (sbx_args_json_only(&a, 0, 0, "", &json) < 0) {
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        return SBX_EXIT_USAGE;
    }
    if (sbx_runner_call(cfg, "GET", "/v1/queue", NULL, NULL, NULL, &resp, &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return SBX_EXIT_FAIL;
    }
    if (json) {
        printf("%s", resp.body);
    }
    else {
        q = json_loadb(resp.body, resp.body_len, 0, NULL);
        print_queue(q);
        json_decref(q);
    }
    sbx_http_response_free(&resp);
    return SBX_EXIT_OK;
}
