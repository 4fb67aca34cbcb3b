/* SPDX-License-Identifier: MIT */
/*
 * A program with an allocator of its own: the executable defines malloc and
 * friends (a bump allocator over a static arena), which take precedence
 * over any preloaded library. memtrace must stay out of its way: same
 * output, no crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Alignas(16) char arena[1 << 24];
static size_t used;

void *malloc(size_t n)
{
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (n > sizeof(arena) - used)
		return NULL;
	p = arena + used;
	used += n;
	return p;
}

void free(void *p)
{
	(void)p;
}

void *calloc(size_t n, size_t size)
{
	void *p = malloc(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p = malloc(n);
	if (p && old)
		memcpy(p, old, n); /* the arena is large enough to read past old */
	return p;
}

int main(void)
{
	char *s = malloc(32);
	strcpy(s, "own allocator");
	printf("%s, %zu bytes used\n", s, used);
	return 0;
}
