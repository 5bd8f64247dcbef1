/* caps.h - what a provider enforces against what a task asks for (fail
 * closed): a task that asks for a limit, egress control or user namespaces
 * the provider does not enforce is refused, unless its instance is configured
 * `unisolated = true`; then every output says so (docs/plugins.md,
 * Capabilities). */
#ifndef SBX_SANDBOX_CAPS_H
#define SBX_SANDBOX_CAPS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "plugin/instance.h"
#include "sbx/sbx_provider.h"
#include "util/error.h"

/* One bit per capability a task can ask for, in the order messages name them. */
enum sbx_cap {
    SBX_CAP_MEMORY = 1u << 0,
    SBX_CAP_CPUS = 1u << 1,
    SBX_CAP_PIDS = 1u << 2,
    SBX_CAP_DISK = 1u << 3,
    SBX_CAP_EGRESS = 1u << 4,
    SBX_CAP_USERNS = 1u << 5,
    SBX_CAP_ALL = (1u << 6) - 1,
};

/* The capabilities a provider enforces: its ops.flags, less what its info()
 * reports off at run time (info may be NULL: none off). */
uint32_t sbx_caps_enforced(uint32_t provider_flags, const struct sbx_provider_info *info);
/* What a task with these limits asks for: each limit set (> 0), and always
 * egress control and user namespaces. */
uint32_t sbx_caps_wanted(const struct sbx_limits *l);
/* "memory, cpus, pids" for the bits of caps ("" for none). */
void sbx_caps_text(uint32_t caps, char *buf, size_t len);
/* "sandbox" when nothing asked is missing, "none" when nothing asked is
 * enforced, else "partial". */
const char *sbx_caps_isolation(uint32_t wanted, uint32_t enforced);

/* The check of one task (or spike column): fills *missing with what is asked
 * and not enforced. Refuses (SBX_E_PLUGIN, one line naming each missing
 * capability) unless the instance is unisolated; then warns once on stderr
 * ("task ID: provider "NAME" is UNISOLATED: ..."). Calls the provider's
 * info() for what is off at run time. */
int sbx_caps_check(struct sbx_open_instance *prov, const char *task_id,
                   const struct sbx_limits *limits, uint32_t *missing, sbx_error_t **err);

/* What `sbx info` says of an instance for tasks with these limits: sets
 * "isolation" ("sandbox", "partial", "none", or "refused" when something is
 * missing and the instance is not unisolated), "unenforced" and "unisolated"
 * on j, and writes the text line into buf. */
void sbx_caps_describe(const struct sbx_open_instance *oi, const struct sbx_provider_info *info,
                       const struct sbx_limits *limits, json_t *j, char *buf, size_t len);
/* Sets "isolation" ("sandbox", "partial" or "none") and, when something is
 * missing, "unenforced" (["memory", ...]) on a task record. */
void sbx_caps_record(json_t *rec, const struct sbx_limits *limits, uint32_t unenforced);

#endif
