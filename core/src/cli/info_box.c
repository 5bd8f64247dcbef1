/* info_box.c - `sbx info`: the admission budget and the shared kernel pools. */
#include "cli/info_box.h"

#include <stdio.h>

#include "sandbox/admit.h"
#include "sandbox/kernel_pool.h"
#include "sbx/sbx_provider.h"

static void admission(const struct sbx_config *cfg, const char *state, json_t *j, int text)
{
    struct sbx_box_budget b;
    sbx_error_t *err = NULL;
    char mem[32], res[32], adm[32], used[32];
    int64_t in_use;
    int held = 0;

    if (sbx_box_budget(cfg, NULL, 0, &b, &err) < 0) {
        json_object_set_new(j, "admission", json_pack("{s:s}", "error", sbx_error_msg(err)));
        if (text) {
            printf("admission:   cannot work it out: %s\n", sbx_error_msg(err));
        }
        sbx_error_free(&err);
        return;
    }
    in_use = state ? sbx_ledger_used(state, &held) : 0;
    json_object_set_new(j, "admission",
                        json_pack("{s:I, s:I, s:I, s:I, s:i, s:f, s:f, s:f}", "memory",
                                  (json_int_t)b.memory, "host_reserve", (json_int_t)b.reserve,
                                  "admit", (json_int_t)b.admit, "admitted", (json_int_t)in_use,
                                  "sandboxes", held, "cpus", b.cpus, "cpu_reserve", b.cpu_reserve,
                                  "cpu_max", b.cpu_max));
    if (text) {
        sbx_admit_size(b.memory, mem, sizeof(mem));
        sbx_admit_size(b.reserve, res, sizeof(res));
        sbx_admit_size(b.admit, adm, sizeof(adm));
        sbx_admit_size(in_use, used, sizeof(used));
        printf("admission:   memory limits up to %s (box.memory %s - box.host_reserve %s), %s "
               "admitted now to %d embedded sandbox%s; CPU quota at most %.3g of %.3g CPUs "
               "(box.cpu_reserve %.3g)\n",
               adm, mem, res, used, held, held == 1 ? "" : "es", b.cpu_max, b.cpus, b.cpu_reserve);
    }
}

static void kernel(const struct sbx_config *cfg, json_t *j, int text)
{
    struct sbx_kernel_pool p[SBX_KERNEL_POOLS];
    json_t *k = json_object();
    int low = sbx_kernel_pools(NULL, cfg->box.max_sandboxes, p);

    json_object_set_new(k, "sandbox_inotify_instances",
                        json_integer(SBX_SANDBOX_INOTIFY_INSTANCES));
    json_object_set_new(k, "sandbox_inotify_watches", json_integer(SBX_SANDBOX_INOTIFY_WATCHES));
    for (int i = 0; i < SBX_KERNEL_POOLS; i++) {
        json_object_set_new(k, p[i].key,
                            json_pack("{s:I, s:I}", "value", (json_int_t)p[i].have, "needed",
                                      (json_int_t)p[i].need));
    }
    json_object_set_new(k, "ok", json_boolean(low == 0));
    json_object_set_new(j, "kernel", k);
    if (!text) {
        return;
    }
    printf("inotify:     each sandbox at most %d instances, %d watches; the box's shared pool: "
           "%s %lld (needs %lld for %d sandboxes), %s %lld (needs %lld)%s\n",
           SBX_SANDBOX_INOTIFY_INSTANCES, SBX_SANDBOX_INOTIFY_WATCHES, p[0].key, p[0].have,
           p[0].need, cfg->box.max_sandboxes, p[1].key, p[1].have, p[1].need,
           low ? ": TOO LOW" : "");
    for (int i = 0; i < SBX_KERNEL_POOLS; i++) {
        if (p[i].have < p[i].need) {
            fprintf(stderr,
                    "sbx: warning: %s is %lld, below the %lld that box.max_sandboxes = %d "
                    "needs: run scripts/kernel-limits.sh (docs/operations.md)\n",
                    p[i].key, p[i].have, p[i].need, cfg->box.max_sandboxes);
        }
    }
}

void sbx_info_box(const struct sbx_config *cfg, const char *state, json_t *j, int text)
{
    admission(cfg, state, j, text);
    kernel(cfg, j, text);
}
