/* spike_checks.c - the spike's Testcontainers, egress, credentials and cost
 * criteria. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/caps.h"
#include "sandbox/task.h"
#include "spike/spike_int.h"
#include "util/units.h"
#include "util/xalloc.h"

struct capture {
    char buf[4096];
    size_t len;
};

static int capture_out(void *ud, int stream, const char *data, size_t len)
{
    struct capture *c = ud;

    if (stream == 1) {
        size_t n = len < sizeof(c->buf) - 1 - c->len ? len : sizeof(c->buf) - 1 - c->len;

        memcpy(c->buf + c->len, data, n);
        c->len += n;
        c->buf[c->len] = '\0';
    }
    return 0;
}

/* Inside the sandbox: Testcontainers (Ryuk off: the daemon dies with the
 * sandbox) starts a container from the seeded image with an exposed port
 * and the listening-ports wait strategy (as every database module does),
 * fetches from its mapped port on the host Testcontainers names, runs a
 * command in it, stops it. The image needs only busybox: the container
 * links its applets (the wait strategy's check runs awk, grep and nc in it)
 * and serves with busybox httpd. */
static const char tc_script[] =
    "process.env.TESTCONTAINERS_RYUK_DISABLED='true';"
    "(async()=>{const {GenericContainer,Wait}=require('testcontainers');"
    "const http=require('http');"
    "const c=await new GenericContainer(process.env.TC_IMAGE).withCommand(['sh','-c',"
    "'busybox --install -s /bin; mkdir -p /www; echo spike-port-ok >/www/index.html; "
    "exec busybox httpd -f -p 8080 -h /www'])"
    ".withExposedPorts(8080).withWaitStrategy(Wait.forListeningPorts())"
    ".withStartupTimeout(60000).start();"
    "const h=c.getHost(),p=c.getMappedPort(8080);"
    "const b=await new Promise((ok,no)=>{http.get({host:h,port:p,path:'/',timeout:5000},"
    "(res)=>{let d='';res.on('data',(x)=>d+=x);res.on('end',()=>ok(res.statusCode+' '+d.trim()));})"
    ".on('error',no);});"
    "if(b!=='200 spike-port-ok')throw new Error('GET http://'+h+':'+p+'/ gave '+b);"
    "const r=await c.exec(['sh','-c','cat /proc/self/uid_map']);"
    "await c.stop();"
    "console.log('TESTCONTAINERS OK '+c.getId().slice(0,12)+' port 8080 -> '+h+':'+p+"
    "' answered; uid_map:'+r.output.trim().replace(/\\s+/g,' '));})()"
    ".catch(e=>{console.log('TESTCONTAINERS FAILED '+e);process.exit(1);});";

void sbx_spike_testcontainers(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    const char *bar = "works with a per-sandbox daemon";
    const char *image = s->cfg->spike.testcontainers_image;
    struct sbx_task_opts o = {
        .provider = s->provider, .pool = "agent", .ephemeral = 1, .nested_containers = 1};
    const char *const argv[] = {"node", "-e", tc_script, NULL};
    struct sbx_kv env[] = {{"TC_IMAGE", image}};
    struct capture cap = {0};
    struct sbx_task *t = NULL;
    sbx_error_t *err = NULL;
    const char *iso = s->info.nested;
    int failure = strncmp(iso, "ISOLATION FAILURE", 17) == 0;
    int st = 0;

    if (!(s->flags & SBX_PROVIDER_NESTED_CONTAINERS)) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          "this provider declares no containers inside a sandbox", "-");
        return;
    }
    fprintf(stderr, "spike: %s: Testcontainers in a sandbox with its own daemon\n", s->provider);
    o.argv = argv;
    if (sbx_task_start(s->cfg, s->plugin_dir, &o, &t, &err) < 0) {
        sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar, sbx_error_msg(err),
                          "sandbox with a sidecar "
                          "did not start");
        sbx_error_free(&err);
        return;
    }
    if (sbx_task_exec(t, argv, env, 1, capture_out, &cap, NULL, &st, &err) < 0) {
        st = -1;
    }
    sbx_task_end(t, "spike", NULL, NULL);
    cap.buf[strcspn(cap.buf, "\n")] = '\0';
    if (st != 0) {
        sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar, err ? sbx_error_msg(err) : cap.buf,
                          "Testcontainers failed (image %s)", image);
    }
    else if (failure) {
        sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar,
                          "a rootful sidecar without user remapping "
                          "is host-root-equivalent",
                          "%s; isolation: %s", cap.buf, iso);
    }
    else {
        sbx_spike_row_set(row, SBX_SPIKE_PASS, bar, NULL, "%s; isolation: %s", cap.buf,
                          iso[0] ? iso : "not reported");
    }
    json_object_set_new(row->raw, "output", json_string(cap.buf));
    json_object_set_new(row->raw, "isolation", json_string(iso));
    json_object_set_new(row->raw, "image", json_string(image));
    sbx_error_free(&err);
}

/* Port of an http URL ("http://host:port/..."), or 80. */
static int url_port(const char *url)
{
    const char *h = strstr(url, "://");
    const char *colon;

    h = h ? h + 3 : url;
    colon = strchr(h, ':');
    return colon != NULL && colon < strchr(h, '/') ? atoi(colon + 1) : 80;
}

static long count_log(const char *path, const char *job, const char *decision)
{
    char *line = NULL;
    size_t cap = 0;
    long n = 0;
    char want_job[200];
    char want_dec[64];
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        return -1;
    }
    snprintf(want_job, sizeof(want_job), "\"job\":\"%s\"", job);
    snprintf(want_dec, sizeof(want_dec), "\"decision\":\"%s\"", decision);
    while (getline(&line, &cap, f) > 0) {
        if (strstr(line, want_job) != NULL && strstr(line, want_dec) != NULL) {
            n++;
        }
    }
    free(line);
    fclose(f);
    return n;
}

void sbx_spike_egress(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    const char *bar = "allowed host reachable, others refused, logged";
    const char *allowed = s->cfg->spike.egress_allowed_url;
    const char *denied = s->cfg->spike.egress_denied_url;
    char script[2048];
    char job[80];
    char *log;
    struct capture cap = {0};
    struct sbx_task_opts o = {.provider = s->provider, .pool = "agent", .ephemeral = 1};
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_task *t = NULL;
    sbx_error_t *err = NULL;
    long allow_lines;
    long deny_lines;
    int st = 0;
    int ok;

    if (!(s->flags & (SBX_PROVIDER_EGRESS_SOCKET | SBX_PROVIDER_ENFORCES_EGRESS))) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar, "this provider declares no egress control",
                          "-");
        return;
    }
    if (allowed == NULL || denied == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          "set spike.egress_allowed_url and "
                          "spike.egress_denied_url (local test servers; the allowed one in "
                          "the policy's allow-list)",
                          "-");
        return;
    }
    snprintf(script, sizeof(script),
             "curl -sS -m 10 -o /dev/null -w '%%{http_code} ' '%s'; "
             "curl -sS -m 10 -o /dev/null -w '%%{http_code} ' '%s'; "
             "curl -sS -m 3 --noproxy '*' -o /dev/null 'http://127.0.0.1:%d/' 2>/dev/null "
             "&& echo direct-reached || echo direct-refused",
             allowed, denied, url_port(allowed));
    o.argv = argv;
    fprintf(stderr, "spike: %s: egress allow-list\n", s->provider);
    if (sbx_task_start(s->cfg, s->plugin_dir, &o, &t, &err) < 0) {
        sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar, sbx_error_msg(err), "task did not start");
        sbx_error_free(&err);
        return;
    }
    sbx_task_job(t, job, sizeof(job));
    log = s->cfg->egress.log ? xstrdup(s->cfg->egress.log)
                             : xasprintf("%s/egress.log", sbx_task_state_dir(t));
    if (sbx_task_exec(t, argv, NULL, 0, capture_out, &cap, NULL, &st, &err) < 0) {
        st = -1;
    }
    sbx_task_end(t, "spike", NULL, NULL);
    cap.buf[strcspn(cap.buf, "\n")] = '\0';
    allow_lines = count_log(log, job, "allow");
    deny_lines = count_log(log, job, "deny");
    ok = st == 0 && (strncmp(cap.buf, "2", 1) == 0 || strncmp(cap.buf, "3", 1) == 0) &&
         strstr(cap.buf, " 403 ") != NULL && strstr(cap.buf, "direct-refused") != NULL &&
         allow_lines > 0 && deny_lines > 0;
    sbx_spike_row_set(row, ok ? SBX_SPIKE_PASS : SBX_SPIKE_FAIL, bar,
                      ok    ? NULL
                      : err ? sbx_error_msg(err)
                            : "see measured",
                      "allowed, denied, direct: %s; log lines for job %s: %ld allow, %ld deny "
                      "(%s)",
                      cap.buf, job, allow_lines, deny_lines, log);
    json_object_set_new(row->raw, "results", json_string(cap.buf));
    json_object_set_new(row->raw, "log", json_string(log));
    json_object_set_new(row->raw, "allow_lines", json_integer(allow_lines));
    json_object_set_new(row->raw, "deny_lines", json_integer(deny_lines));
    free(log);
    sbx_error_free(&err);
}

void sbx_spike_cost(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    /* cgroup v2 (memory.current), else v1 */
    static const char *const argv[] = {"sh", "-c",
                                       "cat /sys/fs/cgroup/memory.current 2>/dev/null || "
                                       "cat /sys/fs/cgroup/memory/memory.usage_in_bytes",
                                       NULL};
    static const char *const true_argv[] = {"true", NULL};
    double price = s->cfg->runner.box_hour_price;
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGE_SIZE);
    double box_mem = (double)pages * (double)page;
    int slots = s->cfg->box.max_sandboxes;
    struct capture cap = {0};
    sbx_error_t *err = NULL;
    double start = 0;
    double teardown = 0;
    double idle_mem;
    double mem_part;
    double time_part;
    double cost;
    char bar[64];
    int no_cgroup;
    int st = 0;

    snprintf(bar, sizeof(bar), "<= $%.2f per agent-hour", s->bar.agent_hour_cost);
    if (price <= 0) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          "set runner.box_hour_price (dollars per "
                          "box-hour) to compute it",
                          "-");
        return;
    }
    /* no per-sandbox memory (provider_host, the bare box): the cgroup read
     * would be the host's; such a "sandbox" holds nothing idle */
    no_cgroup = (sbx_caps_enforced(s->flags, &s->info) & SBX_CAP_MEMORY) == 0;
    if (sbx_spike_one(s, no_cgroup ? true_argv : argv, NULL, capture_out, &cap, &st, &start,
                      &teardown, &err) < 0 ||
        st != 0) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          err ? sbx_error_msg(err) : "cannot read the sandbox's memory use", "-");
        sbx_error_free(&err);
        return;
    }
    idle_mem = no_cgroup ? 0 : strtod(cap.buf, NULL);
    /* what a sandbox costs beyond the task itself: the memory it holds idle,
     * as a share of the box, plus the box time one start and teardown take,
     * spread over the box's slots (one start per agent-hour at least) */
    mem_part = price * idle_mem / box_mem;
    time_part = price * (start + teardown) / 3600.0 / (slots > 0 ? slots : 1);
    cost = mem_part + time_part;
    sbx_spike_row_set(row, cost <= s->bar.agent_hour_cost ? SBX_SPIKE_PASS : SBX_SPIKE_FAIL, bar,
                      cost <= s->bar.agent_hour_cost ? NULL : "over the bar",
                      "$%.4f = $%.2f x %.0f B / %.0f B + $%.2f x (%.2f s + %.2f s) / 3600 / %d",
                      cost, price, idle_mem, box_mem, price, start, teardown, slots);
    json_object_set_new(row->raw, "formula",
                        json_string("price * idle_sandbox_memory / box_memory + price * "
                                    "(start_s + teardown_s) / 3600 / box.max_sandboxes"));
    json_object_set_new(row->raw, "inputs",
                        json_pack("{s:f, s:f, s:f, s:f, s:f, s:i}", "box_hour_price", price,
                                  "idle_sandbox_memory", idle_mem, "box_memory", box_mem, "start_s",
                                  start, "teardown_s", teardown, "max_sandboxes", slots));
    json_object_set_new(row->raw, "dollars_per_agent_hour", json_real(cost));
}
