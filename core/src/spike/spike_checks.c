/* spike_checks.c - the spike's Testcontainers, egress, credentials and cost
 * criteria. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void sbx_spike_testcontainers(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    if (!(s->flags & SBX_PROVIDER_DOCKER_SIDECAR)) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, "works with a per-sandbox daemon",
                          "this provider declares no per-sandbox Docker daemon", "-");
        return;
    }
    sbx_spike_row_set(row, SBX_SPIKE_CANNOT, "works with a per-sandbox daemon",
                      "the Testcontainers check is not wired to this provider", "-");
}

void sbx_spike_egress(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    if (!(s->flags & (SBX_PROVIDER_EGRESS_SOCKET | SBX_PROVIDER_ENFORCES_EGRESS))) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, "allowed host reachable, others refused, logged",
                          "this provider declares no egress control", "-");
        return;
    }
    sbx_spike_row_set(row, SBX_SPIKE_CANNOT, "allowed host reachable, others refused, logged",
                      "the egress proxy is not wired into tasks yet", "-");
}

void sbx_spike_credentials(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    if (s->credentials == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, "only short-lived task secrets inside",
                          "no credential instance given (--credentials NAME)", "-");
        return;
    }
    sbx_spike_row_set(row, SBX_SPIKE_CANNOT, "only short-lived task secrets inside",
                      "credential leases are not wired into tasks yet", "-");
}

void sbx_spike_cost(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    static const char *const argv[] = {"cat", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                                       NULL};
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
    int st = 0;

    snprintf(bar, sizeof(bar), "<= $%.2f per agent-hour", s->bar.agent_hour_cost);
    if (price <= 0) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar, "set runner.box_hour_price (dollars per "
                          "box-hour) to compute it", "-");
        return;
    }
    if (sbx_spike_one(s, argv, NULL, capture_out, &cap, &st, &start, &teardown, &err) < 0 ||
        st != 0) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          err ? sbx_error_msg(err) : "cannot read the sandbox's memory use", "-");
        sbx_error_free(&err);
        return;
    }
    idle_mem = strtod(cap.buf, NULL);
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
                                  "idle_sandbox_memory", idle_mem, "box_memory", box_mem,
                                  "start_s", start, "teardown_s", teardown, "max_sandboxes",
                                  slots));
    json_object_set_new(row->raw, "dollars_per_agent_hour", json_real(cost));
}
