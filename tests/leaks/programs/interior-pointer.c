/* SPDX-License-Identifier: MIT */
/*
 * Blocks reached only through pointers into their middle: possibly lost.
 * A global points 40 bytes into a 100-byte block, another at the last byte
 * of a 50-byte block; a third 8 bytes into a 40-byte holder whose start
 * holds a 30-byte child: the child is reached only through a possible block,
 * so it is possible too. 220 bytes in 4 blocks. One pointer one past the end
 * of a 60-byte block is not into it: that block is definite.
 */
#include <stdlib.h>
#include <string.h>

#include "scrub.h"

struct holder {
	void *child;
	long pad[4];
};

static char *middle;
static char *last_byte;
static char *into_holder;
static char *past_end;

static void keep_interior(void)
{
	char *a = malloc(100);
	char *b = malloc(50);
	struct holder *h = malloc(sizeof(*h));
	char *c = malloc(60);

	memset(a, 'a', 100);
	memset(b, 'b', 50);
	memset(h, 0, sizeof(*h));
	h->child = malloc(30);
	memset(h->child, 'c', 30);
	memset(c, 'e', 60);
	middle = a + 40;
	last_byte = b + 49;
	into_holder = (char *)h + 8;
	past_end = c + 60;
}

int main(void)
{
	keep_interior();
	scrub_stack();
	return 0;
}
