/* SPDX-License-Identifier: MIT */
/*
 * A hash map from a 64-bit key to a fixed-size value stored in place, for
 * the analyzer's tables (live blocks, stacks, per-stack figures). Open
 * addressing with linear probing and backward-shift deletion, so deleting
 * leaves no tombstones and a long replay does not slow down. A slot holds
 * its key mixed (mt_map_mix, a bijection), not the key: the home of every
 * entry a probe or a deletion's shift passes is in it, with no mixing again;
 * the key comes back only for a walk (mt_map_next). An empty slot holds
 * MT_MAP_EMPTY (the key that mixes to it, should a caller use it, lives in
 * one spare slot after the table). A small value sits in the slot
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
#include <string.h>

#define MT_MAP_EMPTY UINT64_MAX

struct mt_map {
	unsigned char *slots; /* cap slots, then the spare one; NULL while cap is 0 */
	unsigned char *vals;  /* cap + 1 large values, or NULL when values are in the slots */
	size_t vsize;
	size_t voff;    /* where a small value starts in its slot */
	unsigned shift; /* log2 of the bytes a slot */
	size_t cap;     /* a power of two, or 0 */
	size_t count;   /* the spare's key included */
	size_t limit;   /* the count at which a new key grows it first: 3/4 of cap, 7/8 dense */
	bool spare_used;
	bool dense;
};

void mt_map_init(struct mt_map *m, size_t vsize);
/*
 * A map that fills to 7/8 of its slots before it doubles: about 15% less
 * memory a key on average, and longer probe runs between 3/4 and 7/8 full
 * (the ring's consumer's live set, kept while the program runs).
 */
void mt_map_init_dense(struct mt_map *m, size_t vsize);
void mt_map_free(struct mt_map *m);
void *mt_map_get(const struct mt_map *m, uint64_t key);
/* The value of key, created zeroed if absent (*created says which); NULL without memory. */
void *mt_map_put(struct mt_map *m, uint64_t key, bool *created);
/*
 * Room for n more entries without growing; -ENOMEM. Also keeps a table that
 * is filled in another map's slot order (keys ordered by their home there)
 * from the long probe runs such an order makes in a smaller table.
 */
int mt_map_reserve(struct mt_map *m, size_t n);
/* Removes key; false when it was not there. */
bool mt_map_del(struct mt_map *m, uint64_t key);
/* Removes key and copies its value to out (vsize bytes) in one probe; false when absent. */
bool mt_map_take(struct mt_map *m, uint64_t key, void *out);
/* Iteration: for (size_t i = 0; mt_map_next(m, &i, &key, &val);) */
bool mt_map_next(const struct mt_map *m, size_t *i, uint64_t *key, void **val);
/* A deep copy of src into dst (dst uninitialised); -ENOMEM. */
int mt_map_copy(struct mt_map *dst, const struct mt_map *src);

/*
 * The same operations for a map whose values sit in the slots (vsize up to
 * 24 bytes), written out for a caller on the hot path that names the layout
 * as constants (MT_MAP_SHIFT, MT_MAP_VOFF of its value's size): the same
 * probes and moves as the functions above, so the entries land in the same
 * slots whichever a caller uses, without the look-ups of a layout known
 * only at run time.
 */
#define MT_MAP_VOFF(vsize)  ((vsize) % 16 == 0 ? 16u : 8u)
#define MT_MAP_SHIFT(vsize) ((vsize) + MT_MAP_VOFF(vsize) <= 16 ? 4u : 5u)

/*
 * A key as its slot holds it: a 64-bit finalizer, because addresses share
 * their low bits (alignment) and stack ids are small consecutive numbers.
 */
static inline uint64_t mt_map_mix(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	key *= 0xc4ceb9fe1a85ec53ull;
	key ^= key >> 33;
	return key;
}

/* The slot where a look-up of the key whose mix is h begins. */
static inline size_t mt_map_home(const struct mt_map *m, uint64_t h)
{
	return (size_t)h & (m->cap - 1);
}

static inline uint64_t *mt_map_slot(const struct mt_map *m, size_t i, unsigned shift)
{
	return (uint64_t *)(void *)(m->slots + (i << shift));
}

/*
 * Starts fetching into the cache the slot where a look-up of key begins, for
 * a look-up soon; with run, also the slot two after it, so that a probe run
 * or a take's shift back that walks past the home slot's line does not wait
 * for the next one. Always inline, and so must be every function it is in
 * that has no other effect: GCC counts a prefetch as none, and drops a call
 * of a function that has none.
 */
static inline __attribute__((always_inline)) void mt_map_prefetch(const struct mt_map *m,
                                                                  uint64_t key, bool run)
{
	if (m->cap) {
		size_t i = mt_map_home(m, mt_map_mix(key));
		__builtin_prefetch(m->slots + (i << m->shift));
		if (run)
			__builtin_prefetch(m->slots + (((i + 2) & (m->cap - 1)) << m->shift));
	}
}

static inline void *mt_map_get_small(const struct mt_map *m, uint64_t key, unsigned shift,
                                     size_t voff)
{
	uint64_t h = mt_map_mix(key);

	if (h == MT_MAP_EMPTY || !m->cap)
		return mt_map_get(m, key);
	for (size_t i = mt_map_home(m, h);; i = (i + 1) & (m->cap - 1)) {
		uint64_t *k = mt_map_slot(m, i, shift);
		if (*k == h)
			return (char *)k + voff;
		if (*k == MT_MAP_EMPTY)
			return NULL;
	}
}

static inline void *mt_map_put_small(struct mt_map *m, uint64_t key, bool *created, unsigned shift,
                                     size_t voff, size_t vsize)
{
	uint64_t h = mt_map_mix(key);

	if (h == MT_MAP_EMPTY || m->count >= m->limit)
		return mt_map_put(m, key, created); /* the spare slot, or growth first */
	*created = false;
	for (size_t i = mt_map_home(m, h);; i = (i + 1) & (m->cap - 1)) {
		uint64_t *k = mt_map_slot(m, i, shift);
		if (*k == h)
			return (char *)k + voff;
		if (*k == MT_MAP_EMPTY) {
			*k = h;
			memset((char *)k + voff, 0, vsize);
			m->count++;
			*created = true;
			return (char *)k + voff;
		}
	}
}

static inline bool mt_map_take_small(struct mt_map *m, uint64_t key, void *out, unsigned shift,
                                     size_t voff, size_t vsize)
{
	size_t mask = m->cap - 1, i, j, gap;
	uint64_t h = mt_map_mix(key), k, *hole;

	if (h == MT_MAP_EMPTY || !m->cap)
		return mt_map_take(m, key, out);
	for (i = mt_map_home(m, h);; i = (i + 1) & mask) {
		k = *mt_map_slot(m, i, shift);
		if (k == h)
			break;
		if (k == MT_MAP_EMPTY)
			return false;
	}
	hole = mt_map_slot(m, i, shift);
	if (out)
		memcpy(out, (char *)hole + voff, vsize);
	/* backward shift: later entries of the probe run move into the hole if their home allows
	 * (is gap or more before them; j - k has the low bits of j - home: the run's walk is
	 * most of a take in a dense set) */
	for (j = (i + 1) & mask, gap = 1; (k = *mt_map_slot(m, j, shift)) != MT_MAP_EMPTY;
	     j = (j + 1) & mask, gap++) {
		if (((j - k) & mask) >= gap) {
			memcpy(hole, mt_map_slot(m, j, shift), (size_t)1 << shift);
			hole = mt_map_slot(m, j, shift);
			gap = 0;
		}
	}
	*hole = MT_MAP_EMPTY;
	m->count--;
	return true;
}

#endif
