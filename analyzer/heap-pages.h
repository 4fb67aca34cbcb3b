/* SPDX-License-Identifier: MIT */
/*
 * The pages of memory that live host blocks touch, kept as blocks come and
 * go: what is left of the heap besides them is whole free pages, which
 * malloc_trim(0) gives back to the system. A block's pages wholly inside it
 * are counted; only its first and last page, which a neighbour may share,
 * are kept by number with the count of blocks on them. So the work per
 * block is O(1) whatever its size, and memory grows with live blocks.
 *
 * May not: print. Errors are negative errno.
 */
#ifndef MEMTRACE_ANALYZER_HEAP_PAGES_H
#define MEMTRACE_ANALYZER_HEAP_PAGES_H

#include <stdint.h>

#include "map.h"

struct mt_heap_pages {
	struct mt_map edges; /* page number -> uint32_t: live blocks on that first or last page */
	uint64_t interior;   /* pages wholly inside one live block */
};

void mt_heap_pages_init(struct mt_heap_pages *p);
void mt_heap_pages_free(struct mt_heap_pages *p);
int mt_heap_pages_copy(struct mt_heap_pages *dst, const struct mt_heap_pages *src);
/* A live block at addr of size bytes (as malloc returned them); its removal. */
int mt_heap_pages_add(struct mt_heap_pages *p, uint64_t addr, uint64_t size);
void mt_heap_pages_remove(struct mt_heap_pages *p, uint64_t addr, uint64_t size);
/* Starts fetching into the cache the counts an add or remove of a block at addr will touch
 * soon: its first page's, and its last page's when its size is given (not 0). */
void mt_heap_pages_prefetch(const struct mt_heap_pages *p, uint64_t addr, uint64_t size);
/* Bytes of the pages live blocks touch. */
uint64_t mt_heap_pages_bytes(const struct mt_heap_pages *p);

#endif
