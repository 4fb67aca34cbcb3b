/* SPDX-License-Identifier: MIT */
/*
 * A cache kept in globals until exit, as real programs keep them: every block
 * is still reachable. 20 entries of 40 bytes in a hash table of 16 buckets,
 * each entry's value 100 + i bytes: 800 + 2190 = 2990 bytes in 40 blocks.
 * It prints one line, so libc's stdout buffer (4096 bytes on a pipe) is
 * still reachable too: valgrind run without __libc_freeres sees it as well.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scrub.h"

struct entry {
	struct entry *next;
	char key[24];
	char *value;
};

static struct entry *buckets[16];

static void fill(int n)
{
	for (int i = 0; i < n; i++) {
		struct entry *e = malloc(sizeof(*e));

		snprintf(e->key, sizeof(e->key), "key %d", i);
		e->value = malloc(100 + (size_t)i);
		memset(e->value, 'v', 100 + (size_t)i);
		e->next = buckets[i % 16];
		buckets[i % 16] = e;
	}
}

int main(void)
{
	fill(20);
	scrub_stack();
	printf("cache of %zu-byte entries\n", sizeof(struct entry));
	return 0;
}
