/* SPDX-License-Identifier: MIT */
/*
 * The free top of the heap that glibc keeps: a 16 MiB block, mmapped and
 * freed, raises glibc's mmap threshold to 16 MiB and its trim threshold to
 * 32 MiB (a block above 32 MiB would not: glibc's ceiling); a 12 MiB block
 * then comes from the top of the heap, and its free leaves 12 MiB there,
 * under the trim threshold, so glibc keeps it. The
 * program then runs a quiet loop of small requests for half a second (the
 * sampler's heap figures are taken in the program's own calls) and prints
 * mallinfo2's keepcost,
 * the truth test-trimmable-top.py holds the finding's figure against.
 * Under MALLOC_TRIM_THRESHOLD_=131072 glibc gives the top back at once.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void idle_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

int main(void)
{
	char *big = malloc(16u << 20), *top;
	struct mallinfo2 mi;

	if (!big)
		return 1;
	memset(big, 1, 16u << 20);
	free(big);
	top = malloc(12u << 20);
	if (!top)
		return 1;
	memset(top, 2, 12u << 20);
	free(top);
	for (int i = 0; i < 50; i++) {
		void *small = malloc(64);
		idle_ms(10);
		free(small);
	}
	mi = mallinfo2();
	printf("keepcost %zu\n", mi.keepcost);
	return 0;
}
