/* SPDX-License-Identifier: MIT */
/*
 * Pages touched by live host blocks (see heap-pages.h).
 *
 * May not: print.
 */
#include <errno.h>

#include "heap-pages.h"

/* glibc's page on the systems memtrace runs on, and the chunk header
 * before each block (its size field) that lives on the block's pages too */
#define PAGE_SHIFT   12
#define CHUNK_HEADER 8

void mt_heap_pages_init(struct mt_heap_pages *p)
{
	mt_map_init(&p->edges, sizeof(uint32_t));
	p->interior = 0;
}

void mt_heap_pages_free(struct mt_heap_pages *p)
{
	mt_map_free(&p->edges);
	p->interior = 0;
}

int mt_heap_pages_copy(struct mt_heap_pages *dst, const struct mt_heap_pages *src)
{
	dst->interior = src->interior;
	return mt_map_copy(&dst->edges, &src->edges);
}

/* The block's first and last page. */
static void span(uint64_t addr, uint64_t size, uint64_t *first, uint64_t *last)
{
	uint64_t start = addr > CHUNK_HEADER ? addr - CHUNK_HEADER : 0;
	uint64_t end = addr + size < addr ? UINT64_MAX : addr + size;

	*first = start >> PAGE_SHIFT;
	*last = (end > start ? end - 1 : start) >> PAGE_SHIFT;
}

/* The layout of the edges' slots, for the map's inline operations. */
#define EDGE_SHIFT MT_MAP_SHIFT(sizeof(uint32_t))
#define EDGE_VOFF  MT_MAP_VOFF(sizeof(uint32_t))

static int edge_add(struct mt_heap_pages *p, uint64_t page)
{
	bool created;
	uint32_t *n =
	        mt_map_put_small(&p->edges, page, &created, EDGE_SHIFT, EDGE_VOFF, sizeof(*n));

	if (!n)
		return -ENOMEM;
	*n = created ? 1 : *n + 1;
	return 0;
}

static void edge_remove(struct mt_heap_pages *p, uint64_t page)
{
	uint32_t *n = mt_map_get_small(&p->edges, page, EDGE_SHIFT, EDGE_VOFF);

	if (n && --*n == 0)
		mt_map_take_small(&p->edges, page, NULL, EDGE_SHIFT, EDGE_VOFF, sizeof(*n));
}

int mt_heap_pages_add(struct mt_heap_pages *p, uint64_t addr, uint64_t size)
{
	uint64_t first, last;
	int ret;

	span(addr, size, &first, &last);
	if ((ret = edge_add(p, first)) < 0)
		return ret;
	if (last != first && (ret = edge_add(p, last)) < 0)
		return ret;
	if (last > first + 1)
		p->interior += last - first - 1;
	return 0;
}

void mt_heap_pages_remove(struct mt_heap_pages *p, uint64_t addr, uint64_t size)
{
	uint64_t first, last;

	span(addr, size, &first, &last);
	edge_remove(p, first);
	if (last != first)
		edge_remove(p, last);
	if (last > first + 1)
		p->interior -= last - first - 1;
}

void mt_heap_pages_prefetch(const struct mt_heap_pages *p, uint64_t addr, uint64_t size)
{
	uint64_t first, last;

	span(addr, size, &first, &last);
	mt_map_prefetch(&p->edges, first, false);
	if (size && last != first)
		mt_map_prefetch(&p->edges, last, false);
}

uint64_t mt_heap_pages_bytes(const struct mt_heap_pages *p)
{
	return (p->interior + p->edges.count) << PAGE_SHIFT;
}
