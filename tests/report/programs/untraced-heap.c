/* SPDX-License-Identifier: MIT */
/*
 * Heap memory memtrace cannot see: blocks from glibc's __libc_malloc, the
 * allocator's own entry point, linked directly (no dlsym, no PLT slot that
 * the preload's malloc takes). With "traced" the same blocks come from
 * malloc: a correct program.
 *
 * Prints mallinfo2's in-use bytes (uordblks + hblkhd) before and after the
 * blocks, the truth the untraced-heap finding is checked against, and holds
 * the blocks to the end.
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#define BLOCKS     (100 * 1024)
#define BLOCK_SIZE 1000

extern void *__libc_malloc(size_t size);

static size_t in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

int main(int argc, char **argv)
{
	int traced = argc > 1 && !strcmp(argv[1], "traced");
	static void *blocks[BLOCKS];
	size_t before = in_use();

	for (int i = 0; i < BLOCKS; i++) {
		blocks[i] = traced ? malloc(BLOCK_SIZE) : __libc_malloc(BLOCK_SIZE);
		if (!blocks[i])
			return 1;
		memset(blocks[i], i, BLOCK_SIZE);
	}
	printf("in use before %zu after %zu\n", before, in_use());
	fflush(stdout);
	return 0;
}
