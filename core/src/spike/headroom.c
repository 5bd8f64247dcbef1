/* headroom.c - the box's free memory and CPU use while the spike loads it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spike/spike_int.h"

static double mem_free_pct(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double total = 0;
    double avail = 0;

    if (f == NULL) {
        return 100.0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        sscanf(line, "MemTotal: %lf kB", &total);
        sscanf(line, "MemAvailable: %lf kB", &avail);
    }
    fclose(f);
    return total > 0 ? 100.0 * avail / total : 100.0;
}

static int cpu_ticks(unsigned long long *busy, unsigned long long *all)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    int n;

    if (f == NULL) {
        return -1;
    }
    n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 5) {
        return -1;
    }
    *all = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    *busy = *all - v[3] - v[4];
    return 0;
}

static void *sample_main(void *arg)
{
    struct sbx_headroom *h = arg;
    unsigned long long b0 = 0;
    unsigned long long a0 = 0;

    cpu_ticks(&b0, &a0);
    while (!h->stop) {
        unsigned long long b1 = 0;
        unsigned long long a1 = 0;
        double m;

        usleep(200 * 1000);
        m = mem_free_pct();
        if (m < h->min_mem_free_pct) {
            h->min_mem_free_pct = m;
        }
        if (cpu_ticks(&b1, &a1) == 0 && a1 > a0) {
            double busy = 100.0 * (double)(b1 - b0) / (double)(a1 - a0);

            if (busy > h->max_cpu_busy_pct) {
                h->max_cpu_busy_pct = busy;
            }
            b0 = b1;
            a0 = a1;
        }
    }
    return NULL;
}

void sbx_headroom_start(struct sbx_headroom *h)
{
    memset(h, 0, sizeof(*h));
    h->min_mem_free_pct = mem_free_pct();
    pthread_create(&h->th, NULL, sample_main, h);
}

void sbx_headroom_stop(struct sbx_headroom *h)
{
    h->stop = 1;
    pthread_join(h->th, NULL);
}
