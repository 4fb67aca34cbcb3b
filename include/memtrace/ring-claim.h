/* SPDX-License-Identifier: MIT */
/*
 * Where a ring's next chunk goes (docs/trace-format.md, The ring): the one
 * rule the writers (preload/writer.c) and the ring's consumer
 * (analyzer/ring.c) both follow when they claim a chunk, over the file
 * header's next_chunk and free stacks. Lock-free: a compare-and-swap whose
 * tag, bumped by every push and pop, makes a stale link fail.
 *
 * No I/O here: the caller reads a free extent's link (it lives in the
 * file, at MT_FREE_LINK_OFFSET) through read_link.
 */
#ifndef MEMTRACE_RING_CLAIM_H
#define MEMTRACE_RING_CLAIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "memtrace/trace-format.h"

/* Reads the link of the free extent at off into *link; false when it cannot. */
typedef bool (*mt_ring_read_link)(void *ctx, uint64_t off, uint64_t *link);

/* The size class of a chunk size (a power of two from MT_CHUNK_SIZE_FIRST). */
static inline unsigned mt_ring_class(uint32_t size)
{
	unsigned c = 0;

	while (c + 1 < MT_RING_CLASSES && (MT_CHUNK_SIZE_FIRST << c) < size)
		c++;
	return c;
}

/* The free head's unit + 1 as an offset. */
static inline uint64_t mt_ring_unit_offset(const struct mt_file_header *h, uint64_t unit1)
{
	return h->header_size + (unit1 - 1) * MT_CHUNK_UNIT;
}

/* An extent given back, of class c, popped off its stack; 0 when there is none. */
static inline uint64_t mt_ring_pop(struct mt_file_header *h, unsigned c, mt_ring_read_link read,
                                   void *ctx)
{
	_Atomic uint64_t *head = (_Atomic uint64_t *)&h->free_head[c];
	uint64_t v = atomic_load(head);

	while (v & 0xffffffffu) {
		uint64_t off = mt_ring_unit_offset(h, v & 0xffffffffu), next;
		if (!read(ctx, off, &next))
			return 0;
		if (atomic_compare_exchange_weak(head, &v,
		                                 ((v >> 32) + 1) << 32 | (next & 0xffffffffu)))
			return off;
	}
	return 0;
}

/*
 * Where the next chunk goes, and its size. A file that only grows: at its
 * end. A ring: an extent given back, of this size or larger; else the end
 * while the file stays within ring_size; else a smaller extent that holds
 * at least min bytes; else the end all the same, counted in ring_overflow,
 * so that an event is never lost to the ring (a consumer that died or fell
 * behind gives nothing back).
 */
static inline uint64_t mt_ring_claim(struct mt_file_header *h, uint32_t *size, uint32_t min,
                                     mt_ring_read_link read, void *ctx)
{
	_Atomic uint64_t *next = (_Atomic uint64_t *)&h->next_chunk;
	uint64_t limit = h->header_size + h->ring_size, off;
	unsigned want = mt_ring_class(*size);

	if (!h->ring_size)
		return atomic_fetch_add(next, *size);
	for (unsigned c = want; c < MT_RING_CLASSES; c++) {
		if ((off = mt_ring_pop(h, c, read, ctx))) {
			*size = MT_CHUNK_SIZE_FIRST << c;
			return off;
		}
	}
	for (off = atomic_load(next); off + *size <= limit;)
		if (atomic_compare_exchange_weak(next, &off, off + *size))
			return off;
	for (unsigned c = want; c-- > mt_ring_class(min);) {
		if ((off = mt_ring_pop(h, c, read, ctx))) {
			*size = MT_CHUNK_SIZE_FIRST << c;
			return off;
		}
	}
	atomic_fetch_add((_Atomic uint64_t *)&h->ring_overflow, *size);
	return atomic_fetch_add(next, *size);
}

#endif
