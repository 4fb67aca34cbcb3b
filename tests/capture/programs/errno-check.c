/* SPDX-License-Identifier: MIT */
/*
 * Prints errno after each allocation call, starting each time from a value
 * no allocator sets: the output must be the same with and without the
 * preload (memtrace may not change what the real function leaves in errno).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define SHOW(call)                                            \
	do {                                                  \
		errno = 4321;                                 \
		call;                                         \
		printf("%-40s errno %d\n", #call, errno);     \
	} while (0)

void *volatile sink;
volatile size_t huge = SIZE_MAX / 2; /* volatile: no compile-time size warnings */

int main(void)
{
	void *p = NULL;

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
