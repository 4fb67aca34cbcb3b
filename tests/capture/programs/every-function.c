/* SPDX-License-Identifier: MIT */
/*
 * Calls every interposed allocation function with known sizes and leaves a
 * known set of blocks live at exit. Prints nothing: stdio would allocate a
 * buffer of its own and blur the figures.
 *
 * Live at exit on the host heap (what tests/capture asserts):
 *   malloc 100, calloc 3 x 50 = 150, realloc grown to 300, realloc shrunk
 *   to 40, realloc(NULL, 70), reallocarray 4 x 25 = 100, posix_memalign 200,
 *   aligned_alloc 256, memalign 96, valloc 1000, realloc(NULL, 0): a 0-byte
 *   block, pvalloc 5000 -> 8192 bytes (whole 4096-byte pages)
 *   = 10,504 bytes in 12 blocks.
 * Freed: malloc 1000, realloc(p, 0) of a 64-byte block, and the blocks the
 * reallocs moved. Anonymous mmap: 1 MiB mapped, its second half unmapped:
 * 512 KiB live in the mmap kind.
 */
#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>

void *keep[16];

int main(void)
{
	void *p;
	int k = 0;

	keep[k++] = malloc(100);
	free(malloc(1000));
	keep[k++] = calloc(3, 50);

	p = malloc(10);
	keep[k++] = realloc(p, 300); /* grow */
	p = malloc(500);
	keep[k++] = realloc(p, 40); /* shrink */
	keep[k++] = realloc(NULL, 70); /* as malloc */
	p = malloc(64);
	if (realloc(p, 0) != NULL) /* glibc frees p and returns NULL */
		return 1;
	keep[k++] = reallocarray(NULL, 4, 25);

	if (posix_memalign(&keep[k++], 64, 200) != 0)
		return 1;
	keep[k++] = aligned_alloc(64, 256);
	keep[k++] = memalign(32, 96);
	keep[k++] = valloc(1000);
	keep[k++] = realloc(NULL, 0);
	/* last: valgrind 3.19 does not intercept pvalloc, see tests/capture */
	keep[k++] = pvalloc(5000);

	char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	m[0] = 1;
	munmap(m + (1 << 19), 1 << 19);
	return malloc_usable_size(keep[0]) >= 100 ? 0 : 1;
}
