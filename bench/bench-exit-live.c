/* SPDX-License-Identifier: MIT */
/*
 * bench-exit-live: a program that ends with N live blocks (default one
 * million), the case the exit's reachability scan is measured on
 * (docs/reachability.md). It builds a symbol table as a program would: N/2
 * entries in a chained hash table, each a node and its key's copy (two
 * blocks), every insert preceded by a lookup; one entry in ten is then
 * unlinked without being freed (a leak: the node definitely lost, its key
 * indirectly). It returns from main with the table held by a global.
 * Usage: bench-exit-live [BLOCKS]
 *
 * Prints one line: the blocks live at exit, the allocator calls made and a
 * checksum of the table's contents.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-common.h"

struct entry {
	struct entry *next;
	char *key;
	uint64_t value;
};

static struct entry **table;
static uint64_t buckets;

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return h;
}

static BENCH_NOIPA struct entry *lookup(const char *key, uint64_t h)
{
	for (struct entry *e = table[h % buckets]; e; e = e->next)
		if (!strcmp(e->key, key))
			return e;
	return NULL;
}

static BENCH_NOIPA void insert(const char *key, uint64_t h, uint64_t value)
{
	struct entry *e = malloc(sizeof(*e));
	size_t n = strlen(key) + 1;

	e->key = malloc(n);
	memcpy(e->key, key, n);
	e->value = value;
	e->next = table[h % buckets];
	table[h % buckets] = e;
}

int main(int argc, char **argv)
{
	uint64_t blocks = bench_count(argc, argv, 1000000), entries = blocks / 2;
	uint64_t rng = 1, sum = 0, calls = 1;
	char key[64];

	buckets = entries / 4 + 1;
	table = calloc(buckets, sizeof(*table));
	for (uint64_t i = 0; i < entries; i++) {
		snprintf(key, sizeof(key), "symbol_%" PRIu64 "_%016" PRIx64, i, bench_rand(&rng));
		uint64_t h = hash(key);
		if (!lookup(key, h)) {
			insert(key, h, i);
			calls += 2;
		}
	}
	/* one entry in ten leaks: unlinked from its chain, never freed */
	for (uint64_t b = 0; b < buckets; b += 10)
		if (table[b])
			table[b] = table[b]->next;
	for (uint64_t b = 0; b < buckets; b++)
		for (struct entry *e = table[b]; e; e = e->next)
			sum = sum * 31 + e->value + (unsigned char)e->key[7];
	printf("bench-exit-live: blocks=%" PRIu64 " calls=%" PRIu64 " checksum=%016" PRIx64 "\n",
	       2 * entries + 1, calls, sum);
	bench_report_rusage();
	return 0;
}
