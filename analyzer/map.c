/* SPDX-License-Identifier: MIT */
/*
 * The analyzer's hash map (see map.h). Keys are mixed with a 64-bit
 * finalizer because addresses share their low bits (alignment) and stack
 * ids are small consecutive numbers.
 *
 * May not: print or abort; allocation failure is returned.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

static size_t slot_of(const struct mt_map *m, uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	key *= 0xc4ceb9fe1a85ec53ull;
	key ^= key >> 33;
	return (size_t)key & (m->cap - 1);
}

void mt_map_init(struct mt_map *m, size_t vsize)
{
	memset(m, 0, sizeof(*m));
	m->vsize = vsize;
}

void mt_map_free(struct mt_map *m)
{
	free(m->keys);
	free(m->used);
	free(m->vals);
	mt_map_init(m, m->vsize);
}

void *mt_map_get(const struct mt_map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
		if (!m->used[i])
			return NULL;
		if (m->keys[i] == key)
			return m->vals + i * m->vsize;
	}
}

static int grow(struct mt_map *m)
{
	struct mt_map n = *m;

	n.cap = m->cap ? m->cap * 2 : 16;
	n.count = 0;
	n.keys = malloc(n.cap * sizeof(*n.keys));
	n.used = calloc(n.cap, 1);
	n.vals = malloc(n.cap * (m->vsize ? m->vsize : 1));
	if (!n.keys || !n.used || !n.vals) {
		free(n.keys);
		free(n.used);
		free(n.vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		bool created;
		if (m->used[i])
			memcpy(mt_map_put(&n, m->keys[i], &created), m->vals + i * m->vsize,
			       m->vsize);
	}
	free(m->keys);
	free(m->used);
	free(m->vals);
	*m = n;
	return 0;
}

void *mt_map_put(struct mt_map *m, uint64_t key, bool *created)
{
	size_t i;

	*created = false;
	if ((m->count + 1) * 4 > m->cap * 3 && grow(m) < 0)
		return NULL;
	for (i = slot_of(m, key); m->used[i]; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return m->vals + i * m->vsize;
	}
	m->used[i] = 1;
	m->keys[i] = key;
	memset(m->vals + i * m->vsize, 0, m->vsize);
	m->count++;
	*created = true;
	return m->vals + i * m->vsize;
}

bool mt_map_del(struct mt_map *m, uint64_t key)
{
	return mt_map_take(m, key, NULL);
}

bool mt_map_take(struct mt_map *m, uint64_t key, void *out)
{
	size_t mask = m->cap - 1, i, j;

	if (!m->cap)
		return false;
	for (i = slot_of(m, key);; i = (i + 1) & mask) {
		if (!m->used[i])
			return false;
		if (m->keys[i] == key)
			break;
	}
	if (out)
		memcpy(out, m->vals + i * m->vsize, m->vsize);
	/* Backward shift: pull later entries of the probe run into the hole if their home allows.
	 */
	for (j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
		size_t home = slot_of(m, m->keys[j]);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->keys[i] = m->keys[j];
			memcpy(m->vals + i * m->vsize, m->vals + j * m->vsize, m->vsize);
			i = j;
		}
	}
	m->used[i] = 0;
	m->count--;
	return true;
}

bool mt_map_next(const struct mt_map *m, size_t *i, uint64_t *key, void **val)
{
	for (; *i < m->cap; (*i)++) {
		if (m->used[*i]) {
			*key = m->keys[*i];
			*val = m->vals + *i * m->vsize;
			(*i)++;
			return true;
		}
	}
	return false;
}

int mt_map_copy(struct mt_map *dst, const struct mt_map *src)
{
	*dst = *src;
	if (!src->cap)
		return 0;
	dst->keys = malloc(src->cap * sizeof(*dst->keys));
	dst->used = malloc(src->cap);
	dst->vals = malloc(src->cap * (src->vsize ? src->vsize : 1));
	if (!dst->keys || !dst->used || !dst->vals) {
		free(dst->keys);
		free(dst->used);
		free(dst->vals);
		mt_map_init(dst, src->vsize);
		return -ENOMEM;
	}
	memcpy(dst->keys, src->keys, src->cap * sizeof(*dst->keys));
	memcpy(dst->used, src->used, src->cap);
	memcpy(dst->vals, src->vals, src->cap * src->vsize);
	return 0;
}
