/* SPDX-License-Identifier: MIT */
/*
 * The analyzer's hash map (analyzer/map.c) against a plain array of the same
 * entries: random puts and takes across growths for a small value (in the
 * slot), a 16-aligned one and a large one (beside the keys), with the key
 * that marks an empty slot and key 0 among them; room reserved ahead; a
 * dense map (the ring's consumer's live set) the same, and its fill.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "map.h"
#include "test-common.h"

#define KEYS 5000

struct big {
	__extension__ unsigned __int128 wide; /* must come back aligned to 16 */
	uint64_t fill[30];
};

static uint64_t keys[KEYS];
/* The key that mixes to MT_MAP_EMPTY: the one kept in the spare slot after the table. */
#define SPARE_KEY 0x89a5850e63c5f8aaull
static bool present[KEYS];

static uint64_t next_random(uint64_t *r)
{
	*r ^= *r << 13;
	*r ^= *r >> 7;
	*r ^= *r << 17;
	return *r;
}

/* Writes and reads the value's first and last 8 bytes, so each size is checked whole. */
static void stamp(void *v, size_t vsize, uint64_t tag)
{
	memcpy(v, &tag, 8);
	memcpy((char *)v + vsize - 8, &tag, 8);
}

static uint64_t tag_of(const void *v, size_t vsize)
{
	uint64_t a, b;

	memcpy(&a, v, 8);
	memcpy(&b, (const char *)v + vsize - 8, 8);
	return a == b ? a : ~a;
}

static void check_all(const struct mt_map *m, size_t vsize, size_t live)
{
	size_t seen = 0;
	uint64_t key;
	void *val;

	CHECK_EQ(m->count, live);
	for (size_t k = 0; k < KEYS; k++) {
		void *v = mt_map_get(m, keys[k]);
		CHECK(!v == !present[k]);
		if (v)
			CHECK_EQ(tag_of(v, vsize), keys[k] * 3 + 1);
	}
	for (size_t i = 0; mt_map_next(m, &i, &key, &val);) {
		CHECK_EQ(tag_of(val, vsize), key * 3 + 1);
		seen++;
	}
	CHECK_EQ(seen, live);
}

/* mt_map_reserve keeps every entry, and the room it makes takes every key left without growing. */
static void reserve_then_fill(struct mt_map *m, size_t vsize, size_t *live)
{
	size_t cap;
	bool created;

	CHECK_EQ(mt_map_reserve(m, KEYS - *live), 0);
	cap = m->cap;
	check_all(m, vsize, *live);
	for (size_t k = 1; k < KEYS; k++) {
		if (present[k])
			continue;
		stamp(mt_map_put(m, keys[k], &created), vsize, keys[k] * 3 + 1);
		present[k] = true;
		(*live)++;
	}
	CHECK_EQ(m->cap, cap);
	CHECK_EQ(mt_map_reserve(m, 0), 0);
	CHECK_EQ(m->cap, cap);
	check_all(m, vsize, *live);
}

static void run(size_t vsize, size_t align, bool dense)
{
	struct mt_map m, copy;
	uint64_t r = 88172645463325252ull, out[sizeof(struct big) / 8];
	size_t live = 0;
	bool created;

	for (size_t k = 0; k < KEYS; k++) {
		keys[k] = next_random(&r) >> (k % 40); /* small keys collide on their low bits */
		present[k] = false;
	}
	keys[0] = SPARE_KEY;
	keys[1] = 0;
	keys[2] = MT_MAP_EMPTY; /* a key like another */
	(dense ? mt_map_init_dense : mt_map_init)(&m, vsize);
	CHECK(!mt_map_get(&m, SPARE_KEY));
	CHECK(!mt_map_take(&m, SPARE_KEY, out));
	for (int round = 0; round < 40000; round++) {
		size_t k = next_random(&r) % KEYS;
		if (present[k]) {
			CHECK(mt_map_take(&m, keys[k], out));
			CHECK_EQ(tag_of(out, vsize), keys[k] * 3 + 1);
			CHECK(!mt_map_get(&m, keys[k]));
			present[k] = false;
			live--;
			continue;
		}
		void *v = mt_map_put(&m, keys[k], &created);
		CHECK(v && created);
		if (!v)
			break;
		CHECK_EQ((uintptr_t)v % align, 0);
		CHECK_EQ(tag_of(v, vsize), 0); /* created zeroed */
		stamp(v, vsize, keys[k] * 3 + 1);
		CHECK(mt_map_get(&m, keys[k]) == v);
		v = mt_map_put(&m, keys[k], &created); /* may grow: v moves */
		CHECK(v && !created && tag_of(v, vsize) == keys[k] * 3 + 1);
		present[k] = true;
		live++;
	}
	check_all(&m, vsize, live);
	reserve_then_fill(&m, vsize, &live);
	present[0] = true; /* the empty-slot key is kept apart: check it survives a copy */
	if (!mt_map_get(&m, SPARE_KEY)) {
		stamp(mt_map_put(&m, SPARE_KEY, &created), vsize, SPARE_KEY * 3 + 1);
		live++;
	}
	CHECK_EQ(mt_map_copy(&copy, &m), 0);
	mt_map_free(&m);
	check_all(&copy, vsize, live);
	CHECK(mt_map_del(&copy, SPARE_KEY));
	CHECK(!mt_map_del(&copy, SPARE_KEY));
	present[0] = false;
	check_all(&copy, vsize, live - 1);
	mt_map_free(&copy);
}

/*
 * The inline operations of a layout named by constants against the
 * functions: the same puts and takes on two maps leave every entry in the
 * same slot, and both visit them in the same order.
 */
#define SAME_SLOTS(vsize)                                                                          \
	do {                                                                                       \
		struct mt_map a, b;                                                                \
		uint64_t r = 2463534242ull, out[3];                                                \
		bool created, made;                                                                \
		mt_map_init(&a, vsize);                                                            \
		mt_map_init(&b, vsize);                                                            \
		for (int round = 0; round < 40000; round++) {                                      \
			uint64_t key = next_random(&r) % 3000 << (round % 7);                      \
			if (round % 1000 == 0)                                                     \
				key = round % 2000 ? MT_MAP_EMPTY : SPARE_KEY;                     \
			if (mt_map_get(&a, key)) {                                                 \
				CHECK(mt_map_take(&a, key, out));                                  \
				CHECK(mt_map_take_small(&b, key, out, MT_MAP_SHIFT(vsize),         \
				                        MT_MAP_VOFF(vsize), vsize));               \
				continue;                                                          \
			}                                                                          \
			CHECK(mt_map_get_small(&b, key, MT_MAP_SHIFT(vsize),                       \
			                       MT_MAP_VOFF(vsize)) == NULL);                       \
			memset(mt_map_put(&a, key, &created), 7, vsize);                           \
			memset(mt_map_put_small(&b, key, &made, MT_MAP_SHIFT(vsize),               \
			                        MT_MAP_VOFF(vsize), vsize),                        \
			       7, vsize);                                                          \
			CHECK(created &&made);                                                     \
		}                                                                                  \
		CHECK_EQ(a.shift, MT_MAP_SHIFT(vsize));                                            \
		CHECK_EQ(a.voff, MT_MAP_VOFF(vsize));                                              \
		CHECK_EQ(a.count, b.count);                                                        \
		CHECK_EQ(a.cap, b.cap);                                                            \
		for (size_t i = 0; i < a.cap; i++)                                                 \
			CHECK_EQ(*mt_map_slot(&a, i, a.shift), *mt_map_slot(&b, i, b.shift));      \
		mt_map_free(&a);                                                                   \
		mt_map_free(&b);                                                                   \
	} while (0)

/* A dense map takes 7/8 of its slots before it doubles, a map 3/4 (the spare's key not counted). */
static void dense_fill(bool dense, size_t keys_in, size_t cap)
{
	struct mt_map m;
	bool created;

	(dense ? mt_map_init_dense : mt_map_init)(&m, 8);
	for (uint64_t k = 1; k <= keys_in; k++)
		*(uint64_t *)mt_map_put(&m, k, &created) = k;
	CHECK_EQ(m.cap, cap);
	CHECK_EQ(m.count, keys_in);
	for (uint64_t k = 1; k <= keys_in; k++)
		CHECK_EQ(*(uint64_t *)mt_map_get(&m, k), k);
	mt_map_free(&m);
}

int main(void)
{
	CHECK_EQ(mt_map_mix(SPARE_KEY), MT_MAP_EMPTY);
	SAME_SLOTS(4);  /* a stat's index, a page's count */
	SAME_SLOTS(16); /* a live block */
	SAME_SLOTS(24);
	run(sizeof(uint64_t), 8, false);     /* a stack's count: in the slot */
	run(3 * sizeof(uint64_t), 8, false); /* a live block: in the slot */
	run(16, 16, false);                  /* an __int128: in the slot, aligned */
	run(sizeof(struct big), 16, false);  /* beside the keys */
	run(8, 8, true);                     /* the ring's consumer's live block */
	run(sizeof(struct big), 16, true);
	dense_fill(true, 112, 128);
	dense_fill(true, 113, 256);
	dense_fill(false, 96, 128);
	dense_fill(false, 97, 256);
	return test_failures ? 1 : 0;
}
