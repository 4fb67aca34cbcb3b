/* SPDX-License-Identifier: MIT */
/*
 * Dense ids for byte strings: equal strings get one id, ids count up from
 * 0 in the order strings were first seen. What an exporter needs for a
 * format of tables that refer to each other by index (pprof's strings,
 * functions and locations).
 *
 * May not: print. A string's bytes live until mt_intern_free.
 */
#ifndef MEMTRACE_ANALYZER_INTERN_H
#define MEMTRACE_ANALYZER_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "map.h"

struct mt_intern {
	struct mt_map by_hash; /* hash of the bytes (+ probe on a clash) -> id + 1 */
	char *pool;            /* the strings, one after another */
	size_t pool_n, pool_cap;
	size_t *off; /* id -> its bytes in pool, its length the next offset less it */
	uint32_t n, cap;
};

void mt_intern_init(struct mt_intern *t);
void mt_intern_free(struct mt_intern *t);
/* The id of the len bytes at s, made on their first use; -ENOMEM. */
int64_t mt_intern(struct mt_intern *t, const void *s, size_t len);
/* The bytes of id (< t->n) and their length. */
const void *mt_intern_get(const struct mt_intern *t, uint32_t id, size_t *len);

#endif
