/* SPDX-License-Identifier: MIT */
/*
 * A table of one 64-bit value by stack id, for what an event of a stack
 * updates. A stack id is its slot in the capture's stack table plus one
 * (docs/architecture.md), so the ids a trace uses are dense below the
 * table's size: they index an array, grown to the largest seen, with no
 * hashing and no probing. Ids past MT_BY_STACK_DENSE (only a corrupt or a
 * hand-made trace has them) go to a hash map.
 *
 * May not: print. A value pointer is valid until the next mt_by_stack_at.
 */
#ifndef MEMTRACE_ANALYZER_BY_STACK_H
#define MEMTRACE_ANALYZER_BY_STACK_H

#include <stdint.h>

#include "map.h"

/* 2^22: past the largest stack table a capture makes (MEMTRACE_STACK_TABLE_BITS) */
#define MT_BY_STACK_DENSE (1u << 22)

struct mt_by_stack {
	uint64_t *dense; /* by id, below cap */
	uint32_t cap;
	struct mt_map rest; /* id -> uint64_t, for ids from MT_BY_STACK_DENSE */
};

void mt_by_stack_init(struct mt_by_stack *t);
void mt_by_stack_free(struct mt_by_stack *t);
uint64_t *mt_by_stack_grow(struct mt_by_stack *t, uint32_t stack);

/* The value of stack, 0 until set; NULL without memory. */
static inline uint64_t *mt_by_stack_at(struct mt_by_stack *t, uint32_t stack)
{
	return stack < t->cap ? &t->dense[stack] : mt_by_stack_grow(t, stack);
}

/* The value of stack, 0 for one never set. */
static inline uint64_t mt_by_stack_get(const struct mt_by_stack *t, uint32_t stack)
{
	const uint64_t *v;

	if (stack < t->cap)
		return t->dense[stack];
	v = stack >= MT_BY_STACK_DENSE ? mt_map_get(&t->rest, stack) : NULL;
	return v ? *v : 0;
}

#endif
