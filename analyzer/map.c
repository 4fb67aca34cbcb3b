/* SPDX-License-Identifier: MIT */
/*
 * The analyzer's hash map (see map.h). Entries land, move and are visited in
 * the same order whatever the slot layout, so the reports' tie orders do not
 * depend on it.
 *
 * May not: print or abort; allocation failure is returned.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

/* The key that mixes to h: mt_map_mix undone, step by step (a shift of 33 undoes itself). */
static uint64_t unmix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0x9cb4b2f8129337dbull; /* the inverse of 0xc4ceb9fe1a85ec53 mod 2^64 */
	h ^= h >> 33;
	h *= 0x4f74430c22a54005ull; /* of 0xff51afd7ed558ccd */
	h ^= h >> 33;
	return h;
}

/*
 * Up to this many value bytes share the slot with the key (two slots a cache
 * line); a larger value would spread the keys a probe walks over many lines.
 */
#define INLINE_MAX 24

static bool apart(const struct mt_map *m)
{
	return m->vsize > INLINE_MAX;
}

static uint64_t *key_at(const struct mt_map *m, size_t i)
{
	return (uint64_t *)(void *)(m->slots + (i << m->shift));
}

static void *val_at(const struct mt_map *m, size_t i)
{
	return m->vals ? m->vals + i * m->vsize : m->slots + (i << m->shift) + m->voff;
}

/* In 8-byte words inline: a libc call of a run-time size costs more than a short copy.
 */
static void copy_words(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	for (; n >= 8; n -= 8, d += 8, s += 8)
		memcpy(d, s, 8);
	for (; n; n--)
		*d++ = *s++;
}

void mt_map_init(struct mt_map *m, size_t vsize)
{
	memset(m, 0, sizeof(*m));
	m->vsize = vsize;
	/* a type aligned to 16 (an __int128 inside) has a size that is a multiple of 16 */
	if (apart(m)) {
		m->shift = 3;
		return;
	}
	m->voff = vsize && vsize % 16 == 0 ? 16 : 8;
	/* a power of two: an index shifts to its slot, and no slot straddles a cache line */
	for (m->shift = 3; (size_t)1 << m->shift < m->voff + vsize; m->shift++)
		;
}

void mt_map_init_dense(struct mt_map *m, size_t vsize)
{
	mt_map_init(m, vsize);
	m->dense = true;
}

void mt_map_free(struct mt_map *m)
{
	bool dense = m->dense;

	free(m->slots);
	free(m->vals);
	mt_map_init(m, m->vsize);
	m->dense = dense; /* emptied, it fills as before */
}

/* The most entries cap slots hold: 3/4 of them, so that probe runs stay short; 7/8 dense. */
static size_t limit_of(const struct mt_map *m, size_t cap)
{
	return m->dense ? cap / 8 * 7 : cap / 4 * 3;
}

void *mt_map_get(const struct mt_map *m, uint64_t key)
{
	uint64_t h = mt_map_mix(key);

	if (h == MT_MAP_EMPTY)
		return m->spare_used ? val_at(m, m->cap) : NULL;
	if (!m->cap)
		return NULL;
	for (size_t i = mt_map_home(m, h);; i = (i + 1) & (m->cap - 1)) {
		uint64_t k = *key_at(m, i);
		if (k == h)
			return val_at(m, i);
		if (k == MT_MAP_EMPTY)
			return NULL;
	}
}

static void *put_mixed(struct mt_map *m, uint64_t h, bool *created);

/* The table rebuilt at cap slots (a power of two that holds every entry). */
static int rehash(struct mt_map *m, size_t cap)
{
	struct mt_map n = *m;

	n.cap = cap;
	n.limit = limit_of(m, cap);
	n.count = 0;
	n.spare_used = false;
	n.slots = malloc((n.cap + 1) << n.shift);
	n.vals = apart(m) ? malloc((n.cap + 1) * n.vsize) : NULL;
	if (!n.slots || (apart(m) && !n.vals)) {
		free(n.slots);
		free(n.vals);
		return -ENOMEM;
	}
	/* every slot MT_MAP_EMPTY: all bits set */
	memset(n.slots, 0xff, (n.cap + 1) << n.shift);
	for (size_t i = 0; i < m->cap; i++) {
		bool created;
		uint64_t k = *key_at(m, i);
		if (k != MT_MAP_EMPTY)
			memcpy(put_mixed(&n, k, &created), val_at(m, i), m->vsize);
	}
	if (m->spare_used) {
		memcpy(val_at(&n, n.cap), val_at(m, m->cap), m->vsize);
		n.spare_used = true;
		n.count++;
	}
	free(m->slots);
	free(m->vals);
	*m = n;
	return 0;
}

static int grow(struct mt_map *m)
{
	return rehash(m, m->cap ? m->cap * 2 : 16);
}

int mt_map_reserve(struct mt_map *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 16;

	while (m->count + n + 1 > limit_of(m, cap))
		cap *= 2;
	return cap == m->cap ? 0 : rehash(m, cap);
}

/* mt_map_put of the key whose mix is h. */
static void *put_mixed(struct mt_map *m, uint64_t h, bool *created)
{
	size_t i;

	*created = false;
	if (m->count >= m->limit && grow(m) < 0)
		return NULL;
	if (h == MT_MAP_EMPTY) {
		i = m->cap;
		if (m->spare_used)
			return val_at(m, i);
		m->spare_used = true;
	} else {
		for (i = mt_map_home(m, h);; i = (i + 1) & (m->cap - 1)) {
			uint64_t k = *key_at(m, i);
			if (k == h)
				return val_at(m, i);
			if (k == MT_MAP_EMPTY)
				break;
		}
		*key_at(m, i) = h;
	}
	memset(val_at(m, i), 0, m->vsize);
	m->count++;
	*created = true;
	return val_at(m, i);
}

void *mt_map_put(struct mt_map *m, uint64_t key, bool *created)
{
	return put_mixed(m, mt_map_mix(key), created);
}

bool mt_map_del(struct mt_map *m, uint64_t key)
{
	return mt_map_take(m, key, NULL);
}

bool mt_map_take(struct mt_map *m, uint64_t key, void *out)
{
	size_t mask = m->cap - 1, i, j;
	uint64_t h = mt_map_mix(key), k;

	if (h == MT_MAP_EMPTY) {
		if (!m->spare_used)
			return false;
		if (out)
			memcpy(out, val_at(m, m->cap), m->vsize);
		m->spare_used = false;
		m->count--;
		return true;
	}
	if (!m->cap)
		return false;
	for (i = mt_map_home(m, h);; i = (i + 1) & mask) {
		k = *key_at(m, i);
		if (k == h)
			break;
		if (k == MT_MAP_EMPTY)
			return false;
	}
	if (out)
		copy_words(out, val_at(m, i), m->vsize);
	/* Backward shift: pull later entries of the probe run into the hole if their home allows.
	 */
	for (j = (i + 1) & mask; (k = *key_at(m, j)) != MT_MAP_EMPTY; j = (j + 1) & mask) {
		size_t home = mt_map_home(m, k);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			copy_words(key_at(m, i), key_at(m, j), (size_t)1 << m->shift);
			if (m->vals)
				memcpy(val_at(m, i), val_at(m, j), m->vsize);
			i = j;
		}
	}
	*key_at(m, i) = MT_MAP_EMPTY;
	m->count--;
	return true;
}

bool mt_map_next(const struct mt_map *m, size_t *i, uint64_t *key, void **val)
{
	for (; *i < m->cap; (*i)++) {
		uint64_t k = *key_at(m, *i);
		if (k != MT_MAP_EMPTY) {
			*key = unmix(k);
			*val = val_at(m, *i);
			(*i)++;
			return true;
		}
	}
	/* the spare last, once: i steps past it */
	if (*i == m->cap && m->spare_used) {
		*key = unmix(MT_MAP_EMPTY);
		*val = val_at(m, m->cap);
		(*i)++;
		return true;
	}
	return false;
}

int mt_map_copy(struct mt_map *dst, const struct mt_map *src)
{
	*dst = *src;
	if (!src->cap)
		return 0;
	dst->slots = malloc((src->cap + 1) << src->shift);
	dst->vals = src->vals ? malloc((src->cap + 1) * src->vsize) : NULL;
	if (!dst->slots || (src->vals && !dst->vals)) {
		free(dst->slots);
		free(dst->vals);
		mt_map_init(dst, src->vsize);
		return -ENOMEM;
	}
	memcpy(dst->slots, src->slots, (src->cap + 1) << src->shift);
	if (src->vals)
		memcpy(dst->vals, src->vals, (src->cap + 1) * src->vsize);
	return 0;
}
