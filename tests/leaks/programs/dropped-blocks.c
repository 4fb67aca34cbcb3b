/* SPDX-License-Identifier: MIT */
/*
 * Blocks dropped outright, one of each allocation function and size class:
 * all definite. malloc 1, 24, 1000, 5000 and 200000 (a chunk of its own
 * mmap), calloc 10 x 30, realloc 40 -> 4000, posix_memalign 64/256,
 * aligned_alloc 4096/8192: 218773 bytes in 9 blocks.
 */
#define _POSIX_C_SOURCE 200112L
#include <stdlib.h>
#include <string.h>

#include "scrub.h"

static void drop(void *p, size_t n)
{
	memset(p, 'd', n);
}

int main(void)
{
	static const size_t sizes[] = {1, 24, 1000, 5000, 200000};
	void *p;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		drop(malloc(sizes[i]), sizes[i]);
	drop(calloc(10, 30), 300);
	drop(realloc(malloc(40), 4000), 4000);
	if (posix_memalign(&p, 64, 256))
		return 1;
	drop(p, 256);
	drop(aligned_alloc(4096, 8192), 8192);
	p = NULL;
	scrub_stack();
	return 0;
}
