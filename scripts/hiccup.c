// hiccup SECS: spin reading CLOCK_MONOTONIC on the calling CPU and count the gaps,
// i.e. the time this thread did not run (preemption, interrupts, a descheduled
// vCPU). docs/results/router.md §3.3d.
// Build: cc -O2 -o /tmp/hiccup scripts/hiccup.c
// Run:   taskset -c 1 nice -n -10 /tmp/hiccup 20
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 10;
    long long end = now() + (long long)(secs * 1e9);
    long long prev = now(), max_gap = 0, n50 = 0, n200 = 0, n1000 = 0, lost = 0;
    for (;;) {
        long long t = now(), gap = t - prev;
        prev = t;
        if (t > end) break;
        if (gap > 50000) { n50++; lost += gap; }
        if (gap > 200000) n200++;
        if (gap > 1000000) n1000++;
        if (gap > max_gap) max_gap = gap;
    }
    printf("secs %.1f gaps>50us %lld >200us %lld >1ms %lld max %.3f ms lost %.2f%%\n",
           secs, n50, n200, n1000, max_gap / 1e6, 100.0 * lost / (secs * 1e9));
    return 0;
}
