/* caps.c - capabilities fail closed: what a provider enforces against what a
 * task asks for. */
#include "sandbox/caps.h"

#include <stdio.h>
#include <string.h>

#include "util/log.h"

static const struct {
    uint32_t cap;
    const char *name;
} cap_names[] = {
    {SBX_CAP_MEMORY, "memory"}, {SBX_CAP_CPUS, "cpus"},     {SBX_CAP_PIDS, "pids"},
    {SBX_CAP_DISK, "disk"},     {SBX_CAP_EGRESS, "egress"}, {SBX_CAP_USERNS, "user namespaces"},
};

/* Provider flag bits to capabilities; ENFORCES_LIMITS is CPU | MEMORY | PIDS. */
static uint32_t from_flags(uint32_t f)
{
    uint32_t c = 0;

    if (f & (SBX_PROVIDER_ENFORCES_LIMITS | SBX_PROVIDER_ENFORCES_MEMORY)) {
        c |= SBX_CAP_MEMORY;
    }
    if (f & (SBX_PROVIDER_ENFORCES_LIMITS | SBX_PROVIDER_ENFORCES_CPU)) {
        c |= SBX_CAP_CPUS;
    }
    if (f & (SBX_PROVIDER_ENFORCES_LIMITS | SBX_PROVIDER_ENFORCES_PIDS)) {
        c |= SBX_CAP_PIDS;
    }
    if (f & SBX_PROVIDER_ENFORCES_DISK) {
        c |= SBX_CAP_DISK;
    }
    if (f & (SBX_PROVIDER_EGRESS_SOCKET | SBX_PROVIDER_ENFORCES_EGRESS)) {
        c |= SBX_CAP_EGRESS;
    }
    if (f & SBX_PROVIDER_ENFORCES_USERNS) {
        c |= SBX_CAP_USERNS;
    }
    return c;
}

uint32_t sbx_caps_enforced(uint32_t provider_flags, const struct sbx_provider_info *info)
{
    uint32_t c = from_flags(provider_flags);

    if (info != NULL) {
        /* ENFORCES_LIMITS off turns off all three; a single bit off, its own */
        c &= ~from_flags(info->flags_off);
        if (info->userns == 0) {
            c &= ~(uint32_t)SBX_CAP_USERNS;
        }
    }
    return c;
}

uint32_t sbx_caps_wanted(const struct sbx_limits *l)
{
    uint32_t c = SBX_CAP_EGRESS | SBX_CAP_USERNS;

    if (l->memory > 0) {
        c |= SBX_CAP_MEMORY;
    }
    if (l->cpus > 0) {
        c |= SBX_CAP_CPUS;
    }
    if (l->pids > 0) {
        c |= SBX_CAP_PIDS;
    }
    if (l->disk > 0) {
        c |= SBX_CAP_DISK;
    }
    return c;
}

void sbx_caps_text(uint32_t caps, char *buf, size_t len)
{
    size_t at = 0;

    if (len == 0) {
        return;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++) {
        if ((caps & cap_names[i].cap) == 0) {
            continue;
        }
        int n = snprintf(buf + at, len - at, "%s%s", at ? ", " : "", cap_names[i].name);

        if (n < 0 || (size_t)n >= len - at) {
            return;
        }
        at += (size_t)n;
    }
}

const char *sbx_caps_isolation(uint32_t wanted, uint32_t enforced)
{
    if ((wanted & ~enforced) == 0) {
        return "sandbox";
    }
    return (wanted & enforced) == 0 ? "none" : "partial";
}

int sbx_caps_check(struct sbx_open_instance *prov, const char *task_id,
                   const struct sbx_limits *limits, uint32_t *missing, sbx_error_t **err)
{
    const struct sbx_provider_ops *ops = sbx_instance_provider(prov);
    struct sbx_provider_info info = {.userns = -1};
    uint32_t have;
    uint32_t want = sbx_caps_wanted(limits);
    char names[128];

    if (ops->info == NULL || ops->info(prov->ctx, &info, NULL) < 0) {
        memset(&info, 0, sizeof(info));
        info.userns = -1;
    }
    have = sbx_caps_enforced(ops->flags, &info);
    *missing = want & ~have;
    if (*missing == 0) {
        return 0;
    }
    sbx_caps_text(*missing, names, sizeof(names));
    if (!prov->cfg->unisolated) {
        return sbx_error_set(err, SBX_E_PLUGIN,
                             "provider \"%s\" does not enforce %s that the policy asks for; "
                             "set unisolated = true on the instance to run anyway",
                             prov->cfg->name, names);
    }
    sbx_warn("task %s: provider \"%s\" is UNISOLATED (isolation: %s): it does not enforce %s; "
             "the task runs with the host's privileges where those are missing",
             task_id, prov->cfg->name, sbx_caps_isolation(want, have), names);
    return 0;
}

void sbx_caps_record(json_t *rec, const struct sbx_limits *limits, uint32_t unenforced)
{
    uint32_t want = sbx_caps_wanted(limits) | unenforced;
    json_t *list;

    json_object_set_new(rec, "isolation",
                        json_string(sbx_caps_isolation(want, want & ~unenforced)));
    if (unenforced == 0) {
        return;
    }
    list = json_array();
    for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++) {
        if (unenforced & cap_names[i].cap) {
            json_array_append_new(list, json_string(cap_names[i].name));
        }
    }
    json_object_set_new(rec, "unenforced", list);
}

void sbx_caps_describe(const struct sbx_open_instance *oi, const struct sbx_provider_info *info,
                       const struct sbx_limits *limits, json_t *j, char *buf, size_t len)
{
    uint32_t want = sbx_caps_wanted(limits);
    uint32_t have = sbx_caps_enforced(sbx_instance_provider(oi)->flags, info);
    uint32_t missing = want & ~have;
    char names[128];

    sbx_caps_record(j, limits, missing);
    json_object_set_new(j, "unisolated", json_boolean(oi->cfg->unisolated));
    if (missing == 0) {
        sbx_caps_text(want, names, sizeof(names));
        snprintf(buf, len, "sandbox: the provider enforces %s", names);
        return;
    }
    sbx_caps_text(missing, names, sizeof(names));
    if (!oi->cfg->unisolated) {
        json_object_set_new(j, "isolation", json_string("refused"));
        snprintf(buf, len,
                 "REFUSED: the provider does not enforce %s; tasks are refused "
                 "(set unisolated = true on instance '%s' to run anyway)",
                 names, oi->cfg->name);
        return;
    }
    snprintf(buf, len, "UNISOLATED (%s, unisolated = true): %s not enforced",
             sbx_caps_isolation(want, have), names);
}
