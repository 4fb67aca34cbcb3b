/* SPDX-License-Identifier: MIT */
/*
 * 5,000 distinct small stacks under 3 callers: each caller walks down 13
 * levels of walk(), taking one of two call sites at each level by a bit of
 * its code, so each code is a stack of its own, and allocates one block
 * at the bottom; all are left live. No stack reaches 0.1% of the total,
 * each caller a third of it:
 *
 *   caller_a: codes 0 .. 1666, 16 bytes each: 1,667 blocks, 26,672 bytes
 *   caller_b: codes 0 .. 1666, 32 bytes each: 1,667 blocks, 53,344 bytes
 *   caller_c: codes 0 .. 1665, 48 bytes each: 1,666 blocks, 79,968 bytes
 */
#include <stdlib.h>

#define LEVELS 13

__attribute__((noinline)) static void *walk(int level, unsigned code, size_t size)
{
	if (level == LEVELS)
		return malloc(size);
	/* two call sites: two return addresses, two stacks */
	if (code >> level & 1)
		return walk(level + 1, code, size);
	else
		return walk(level + 1, code, size);
}

__attribute__((noinline)) static int caller_a(void)
{
	for (unsigned c = 0; c < 1667; c++)
		if (!walk(0, c, 16))
			return 1;
	return 0;
}

__attribute__((noinline)) static int caller_b(void)
{
	for (unsigned c = 0; c < 1667; c++)
		if (!walk(0, c, 32))
			return 1;
	return 0;
}

__attribute__((noinline)) static int caller_c(void)
{
	for (unsigned c = 0; c < 1666; c++)
		if (!walk(0, c, 48))
			return 1;
	return 0;
}

int main(void)
{
	return caller_a() | caller_b() | caller_c();
}
