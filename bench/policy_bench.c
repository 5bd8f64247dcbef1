/* policy_bench.c - policy decisions per second (all three scripts per decision).
 *
 * Usage: policy_bench [SECONDS] [POLICY_DIR]
 * Measures the shipped policies (or POLICY_DIR) over a mix of jobs, and a peer
 * in the same run: three trivial scripts returning constant tables, which is
 * the fixed cost of the engine (state, fresh environments, job table,
 * validation). Prints decisions/s for both and their ratio. Target: 50,000/s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "policy/policy.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double run(const char *dir, const struct sbx_config *cfg, double seconds)
{
    static const char *const encore[] = {"encore", "test", NULL};
    static const char *const npm[] = {"npm", "ci", NULL};
    static const char *const shell[] = {"bash", NULL};
    static const char *const e2e[] = {"infisical", "run",  "--env",    "ci",
                                      "--",        "pnpm", "test:e2e", NULL};
    static const struct sbx_kv labels[] = {{"team", "core"}, {"repo", "stackra"}};
    struct sbx_job_desc jobs[] = {
        {.id = "j1",
         .task = "t1",
         .pool = "ci",
         .argv = encore,
         .workdir = "/workspace",
         .repository = "stackra/app",
         .labels = labels,
         .n_labels = 2},
        {.id = "j2", .task = "t2", .pool = "ci", .argv = npm, .workdir = "/workspace"},
        {.id = "j3",
         .task = "t3",
         .pool = "agent",
         .argv = shell,
         .requested = {.cpus = 1, .memory = 4LL << 30}},
        {.id = "j4", .task = "t4", .pool = "ci", .argv = e2e, .labels = labels, .n_labels = 2},
    };
    sbx_error_t *err = NULL;
    struct sbx_policy *p = sbx_policy_load(dir, cfg, &err);
    long n = 0;
    double start;
    double elapsed;

    if (p == NULL) {
        fprintf(stderr, "policy_bench: %s\n", err->msg);
        exit(1);
    }
    start = now();
    do {
        for (int i = 0; i < 1000; i++) {
            struct sbx_policy_decision d;

            if (sbx_policy_decide(p, &jobs[n % 4], &d, &err) < 0) {
                fprintf(stderr, "policy_bench: %s\n", err->msg);
                exit(1);
            }
            sbx_policy_decision_fini(&d);
            n++;
        }
        elapsed = now() - start;
    } while (elapsed < seconds);
    sbx_policy_destroy(p);
    return (double)n / elapsed;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    const char *dir = argc > 2 ? argv[2] : SBX_BENCH_POLICY_DIR;
    char peer[] = "/tmp/sbx-policy-bench-XXXXXX";
    struct sbx_config *cfg = sbx_config_defaults();
    double shipped;
    double trivial;

    if (mkdtemp(peer) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    write_file(peer, "limits.lua", "return { cpus = 2, memory = 8 * GiB }\n");
    write_file(peer, "egress.lua", "return { allow = { \"github.com\" } }\n");
    write_file(peer, "slots.lua", "return { class = \"light\" }\n");

    trivial = run(peer, cfg, seconds);
    shipped = run(dir, cfg, seconds);
    printf("policy decisions (limits + egress + slots), %.1f s each:\n", seconds);
    printf("  shipped policies (%s): %.0f decisions/s (%.1f us each)\n", dir, shipped,
           1e6 / shipped);
    printf("  peer, trivial scripts:  %.0f decisions/s (%.1f us each)\n", trivial, 1e6 / trivial);
    printf("  ratio shipped/peer: %.2f; target 50000/s: %s\n", shipped / trivial,
           shipped >= 50000 ? "met" : "NOT met");
    for (const char *f = "limits.lua\0egress.lua\0slots.lua\0"; *f; f += strlen(f) + 1) {
        char path[4096];

        snprintf(path, sizeof(path), "%s/%s", peer, f);
        remove(path);
    }
    rmdir(peer);
    sbx_config_destroy(cfg);
    return 0;
}
