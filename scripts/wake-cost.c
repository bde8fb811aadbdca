/* The cost of waking a blocked thread on this machine, without weft: two processes
 * pass a byte back and forth over two pipes, 100000 round trips (two wake-ups
 * each), pinned to one core or to two. docs/results/ibverbs.md ("Link watch") uses
 * it to show what a WRITE served by a woken engine thread must pay.
 *
 *   cc -O2 -o /tmp/wake-cost scripts/wake-cost.c && /tmp/wake-cost && /tmp/wake-cost same
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) perror("sched_setaffinity");
}

int main(int argc, char **argv) {
    const int rounds = 100000;
    int same = argc > 1 && strcmp(argv[1], "same") == 0;
    int ping[2], pong[2];
    char b = 0;
    if (pipe(ping) || pipe(pong)) return perror("pipe"), 1;
    pid_t child = fork();
    if (child < 0) return perror("fork"), 1;
    if (child == 0) {
        pin(same ? 0 : 1);
        for (int i = 0; i < rounds; i++)
            if (read(ping[0], &b, 1) != 1 || write(pong[1], &b, 1) != 1) return 1;
        return 0;
    }
    pin(0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < rounds; i++)
        if (write(ping[1], &b, 1) != 1 || read(pong[0], &b, 1) != 1) return 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    waitpid(child, NULL, 0);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("%s: %.2f us per round trip, %.2f us per wake-up\n", same ? "one core" : "two cores",
           ns / 1e3 / rounds, ns / 2e3 / rounds);
    return 0;
}
