/* SPDX-License-Identifier: MIT */
/*
 * A hash map from a 64-bit key to a fixed-size value stored in place, for
 * the analyzer's tables (live blocks, stacks, per-stack figures). Open
 * addressing with linear probing and backward-shift deletion, so deleting
 * leaves no tombstones and a long replay does not slow down. An empty slot
 * holds the key MT_MAP_EMPTY (that key itself, should a caller use it,
 * lives in one spare slot after the table). A small value sits in the slot
 * next to its key, so a lookup costs one cache miss; a large one sits in a
 * parallel array, so that probing runs over densely packed keys.
 *
 * May not: print. A value pointer is valid until the next put or delete;
 * it is aligned to 8 bytes, or to 16 when vsize is a multiple of 16.
 */
#ifndef MEMTRACE_ANALYZER_MAP_H
#define MEMTRACE_ANALYZER_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MT_MAP_EMPTY UINT64_MAX

struct mt_map {
	unsigned char *slots; /* cap slots, then the spare one; NULL while cap is 0 */
	unsigned char *vals;  /* cap + 1 large values, or NULL when values are in the slots */
	size_t vsize;
	size_t voff;    /* where a small value starts in its slot */
	unsigned shift; /* log2 of the bytes a slot */
	size_t cap;     /* a power of two, or 0 */
	size_t count;   /* the spare's key included */
	bool spare_used;
};

void mt_map_init(struct mt_map *m, size_t vsize);
void mt_map_free(struct mt_map *m);
void *mt_map_get(const struct mt_map *m, uint64_t key);
/* The value of key, created zeroed if absent (*created says which); NULL without memory. */
void *mt_map_put(struct mt_map *m, uint64_t key, bool *created);
/* Starts fetching the slot where a look-up of key begins into the cache, for a look-up soon. */
void mt_map_prefetch(const struct mt_map *m, uint64_t key);
/* Removes key; false when it was not there. */
bool mt_map_del(struct mt_map *m, uint64_t key);
/* Removes key and copies its value to out (vsize bytes) in one probe; false when absent. */
bool mt_map_take(struct mt_map *m, uint64_t key, void *out);
/* Iteration: for (size_t i = 0; mt_map_next(m, &i, &key, &val);) */
bool mt_map_next(const struct mt_map *m, size_t *i, uint64_t *key, void **val);
/* A deep copy of src into dst (dst uninitialised); -ENOMEM. */
int mt_map_copy(struct mt_map *dst, const struct mt_map *src);

#endif
