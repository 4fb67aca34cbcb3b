/* SPDX-License-Identifier: MIT */
/*
 * Structs freed without their members: each member is definite, although
 * the freed struct's memory still holds its address (malloc writes its own
 * links only at the start of a free chunk). Eight 32-byte structs (seven go
 * to the tcache, the eighth to a fastbin) with a 50-byte member at offset
 * 16; one 2016-byte struct (the unsorted bin: a guard block after it keeps it
 * from the top chunk) with a 70-byte member at offset 2000; one 200008-byte
 * struct (its own mmap, unmapped by free) with a 90-byte member: 560 bytes in
 * 10 blocks definite. The 16-byte guard is kept in a global: reachable.
 */
#include <stdlib.h>
#include <string.h>

#include "scrub.h"

struct small {
	long a, b;
	char *member;
	long c;
};

struct big {
	char pad[2000];
	char *member;
	long c;
};

struct huge {
	char pad[200000];
	char *member;
};

static void *guard;

static char *member(size_t n)
{
	char *p = malloc(n);

	memset(p, 'm', n);
	return p;
}

static void free_structs(void)
{
	struct small *small[8];
	struct big *big;
	struct huge *huge;

	for (int i = 0; i < 8; i++) {
		small[i] = malloc(sizeof(*small[i]));
		small[i]->member = member(50);
	}
	big = malloc(sizeof(*big));
	big->member = member(70);
	guard = malloc(16);
	huge = malloc(sizeof(*huge));
	huge->member = member(90);
	for (int i = 0; i < 8; i++)
		free(small[i]);
	free(big);
	free(huge);
}

int main(void)
{
	free_structs();
	scrub_stack();
	return 0;
}
