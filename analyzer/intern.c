/* SPDX-License-Identifier: MIT */
/*
 * Interned byte strings (intern.h): FNV-1a hashes in a map, a clash moving
 * on to the next key until the bytes compare equal or a free key is found.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "intern.h"

void mt_intern_init(struct mt_intern *t)
{
	memset(t, 0, sizeof(*t));
	mt_map_init(&t->by_hash, sizeof(uint32_t));
}

void mt_intern_free(struct mt_intern *t)
{
	mt_map_free(&t->by_hash);
	free(t->pool);
	free(t->off);
	memset(t, 0, sizeof(*t));
}

const void *mt_intern_get(const struct mt_intern *t, uint32_t id, size_t *len)
{
	size_t end = id + 1 < t->n ? t->off[id + 1] : t->pool_n;

	*len = end - t->off[id];
	return t->pool + t->off[id];
}

int64_t mt_intern(struct mt_intern *t, const void *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t cap = t->cap, have;
	const void *old;
	uint32_t *slot;
	bool created;

	for (size_t i = 0; i < len; i++) {
		h ^= ((const unsigned char *)s)[i];
		h *= 0x100000001b3ull;
	}
	for (;; h++) {
		slot = mt_map_put(&t->by_hash, h, &created);
		if (!slot)
			return -ENOMEM;
		if (created)
			break;
		old = mt_intern_get(t, *slot - 1, &have);
		if (have == len && !memcmp(old, s, len))
			return *slot - 1;
	}
	if (mt_grow((void **)&t->pool, &t->pool_cap, t->pool_n + len + 1, 1) < 0 ||
	    mt_grow((void **)&t->off, &cap, (size_t)t->n + 1, sizeof(*t->off)) < 0) {
		mt_map_del(&t->by_hash, h);
		return -ENOMEM;
	}
	t->cap = (uint32_t)cap;
	if (len)
		memcpy(t->pool + t->pool_n, s, len);
	t->off[t->n] = t->pool_n;
	t->pool_n += len;
	*slot = ++t->n;
	return t->n - 1;
}
