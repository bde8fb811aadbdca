/* LD_PRELOAD diagnostic: counts sched_yield calls by thread name (weft-engine or
 * other) and prints them to stderr when the process exits. With WEFT_DIAG_NOYIELD
 * set, an application thread's (not the engine thread's) yield returns at once
 * without the system call. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <stdlib.h>
static atomic_long app, eng;
int sched_yield(void) {
    char name[17] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    if (strncmp(name, "weft-engine", 11) == 0) atomic_fetch_add(&eng, 1);
    else {
        atomic_fetch_add(&app, 1);
        if (getenv("WEFT_DIAG_NOYIELD")) return 0;
    }
    return (int)syscall(SYS_sched_yield);
}
__attribute__((destructor)) static void fin(void) {
    char b[160];
    int k = snprintf(b, sizeof b, "yields pid %d: app %ld engine %ld\n", getpid(),
                     atomic_load(&app), atomic_load(&eng));
    if (k > 0) write(2, b, (size_t)k);
}
