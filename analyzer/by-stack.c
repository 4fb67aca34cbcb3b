/* SPDX-License-Identifier: MIT */
/*
 * A table by stack id (see by-stack.h).
 *
 * May not: print or abort; allocation failure is returned.
 */
#include <stdlib.h>
#include <string.h>

#include "by-stack.h"

void mt_by_stack_init(struct mt_by_stack *t)
{
	t->dense = NULL;
	t->cap = 0;
	mt_map_init(&t->rest, sizeof(uint64_t));
}

void mt_by_stack_free(struct mt_by_stack *t)
{
	free(t->dense);
	mt_map_free(&t->rest);
	mt_by_stack_init(t);
}

/* mt_by_stack_at for an id past the array: the array grown to hold it, or the map. */
uint64_t *mt_by_stack_grow(struct mt_by_stack *t, uint32_t stack)
{
	uint32_t cap = t->cap ? t->cap : 1024;
	uint64_t *dense;
	bool created;

	if (stack >= MT_BY_STACK_DENSE)
		return mt_map_put(&t->rest, stack, &created);
	while (cap <= stack)
		cap *= 2;
	dense = realloc(t->dense, (size_t)cap * sizeof(*dense));
	if (!dense)
		return NULL;
	memset(dense + t->cap, 0, (size_t)(cap - t->cap) * sizeof(*dense));
	t->dense = dense;
	t->cap = cap;
	return &t->dense[stack];
}
