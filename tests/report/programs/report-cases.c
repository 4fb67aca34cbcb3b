/* SPDX-License-Identifier: MIT */
/*
 * Known figures for the report's own columns (tests/report): prints
 * nothing, so that stdio allocates nothing.
 *
 *   temporary allocations: 5 (malloc(32) freed before the next malloc);
 *     the block of 100 bytes is not one: a malloc came before its free
 *   leaked: the block of 200 bytes
 *   failed: malloc(2^62) with ENOMEM while 200 bytes are live in 1 block
 *   size histogram: [32, 64) 5, [64, 128) 1, [128, 256) 1
 */
#include <errno.h>
#include <stdlib.h>

void *keep;

int main(void)
{
	void *a, *huge;

	for (int i = 0; i < 5; i++)
		free(malloc(32));
	a = malloc(100);
	keep = malloc(200);
	free(a);
	huge = malloc((size_t)1 << 62);
	return huge == NULL && errno == ENOMEM ? 0 : 1;
}
