/* SPDX-License-Identifier: MIT */
/*
 * COUNT distinct call stacks (default 50,000), more than the first stack
 * table holds: stack i is a recursion 16 levels deep through two functions,
 * level k going through one or the other by bit k of i, so every i has its
 * own return addresses. Stack i leaks 1 + i % 3 blocks of (1 + i % 3) * 8
 * bytes, so the report shows every stack with known figures: a stack whose
 * id were shared with another would show the sum of both.
 * Usage: many-stacks [COUNT]
 */
#include <stdio.h>
#include <stdlib.h>

#define LEVELS 16

void *volatile sink;

static void level0(unsigned i, int k);
static void level1(unsigned i, int k);

static __attribute__((noinline)) void leaf(unsigned i)
{
	unsigned c = 1 + i % 3;

	for (unsigned j = 0; j < c; j++)
		sink = malloc(c * 8);
}

static __attribute__((noinline)) void next(unsigned i, int k)
{
	if (k == LEVELS)
		leaf(i);
	else if (i >> k & 1)
		level1(i, k + 1);
	else
		level0(i, k + 1);
}

static __attribute__((noinline)) void level0(unsigned i, int k)
{
	next(i, k);
	__asm__ volatile("");
}

static __attribute__((noinline)) void level1(unsigned i, int k)
{
	next(i, k);
	__asm__ volatile("");
}

int main(int argc, char **argv)
{
	unsigned count = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 50000;

	if (count > 1u << LEVELS)
		return 2;
	for (unsigned i = 0; i < count; i++)
		next(i, 0);
	printf("stacks %u\n", count);
	return 0;
}
