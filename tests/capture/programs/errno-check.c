/* SPDX-License-Identifier: MIT */
/*
 * Prints errno after each allocation call, starting each time from a value
 * no allocator sets: the output must be the same with and without the
 * preload (memtrace may not change what the real function leaves in errno).
 *
 * errno-check live N: closes its standard error (as a daemon does), then
 * makes N blocks of 16 bytes, none freed, each from errno 4321, and prints
 * how many left errno as it was. Traced with MEMTRACE_SAMPLING=1, every one
 * is recorded and the table of sampled blocks fills: memtrace stops, and
 * has nowhere to say so.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SHOW(call)                                            \
	do {                                                  \
		errno = 4321;                                 \
		call;                                         \
		printf("%-40s errno %d\n", #call, errno);     \
	} while (0)

void *volatile sink;
volatile size_t huge = SIZE_MAX / 2; /* volatile: no compile-time size warnings */

static int live(long n)
{
	long kept = 0;

	close(STDERR_FILENO);
	for (long i = 0; i < n; i++) {
		errno = 4321;
		if (!malloc(16))
			return 1;
		kept += errno == 4321;
	}
	printf("errno kept after %ld of %ld\n", kept, n);
	return 0;
}

int main(int argc, char **argv)
{
	void *p = NULL;

	if (argc == 3 && !strcmp(argv[1], "live"))
		return live(atol(argv[2]));

	SHOW(sink = malloc(10));
	SHOW(free(sink));
	SHOW(sink = malloc(huge));
	SHOW(sink = calloc(huge, 4));
	SHOW(sink = realloc(NULL, 100));
	SHOW(p = realloc(sink, huge));
	SHOW(free(sink));
	SHOW(posix_memalign(&p, 3, 10));
	SHOW(sink = mmap(NULL, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	SHOW(munmap(sink, 1 << 20));
	SHOW(munmap((void *)1, 1));
	SHOW(sink = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, -1, 0));
	return 0;
}
