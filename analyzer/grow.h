/* SPDX-License-Identifier: MIT */
/*
 * A growing array, as the analyzer's tables keep them: room for at least
 * `need` elements of `size` bytes, the capacity doubled (from 64) so that
 * n appends cost O(n) copies. -ENOMEM leaves the array as it was.
 */
#ifndef MEMTRACE_ANALYZER_GROW_H
#define MEMTRACE_ANALYZER_GROW_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

static inline int mt_grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap * 2 : 64;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

#endif
