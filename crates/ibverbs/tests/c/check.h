/* weft-ibverbs C tests: CHECK(cond, fmt, ...) names the failed check (file, line,
 * message) on stderr and exits 1. Included by every test in this directory. */
#ifndef WEFT_TEST_CHECK_H
#define WEFT_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                       \
			fprintf(stderr, "\n");                              \
			exit(1);                                            \
		}                                                           \
	} while (0)

#endif
