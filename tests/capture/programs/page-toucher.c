/* SPDX-License-Identifier: MIT */
/*
 * page-toucher MS: for MS milliseconds, every 2 ms, maps 1 MiB, writes each
 * of its pages and unmaps it (mmap itself: glibc's malloc would keep the
 * block in its heap after the first free, and no page would move): its resident
 * pages stay few, so that smaps_rollup stays cheap, but move by hundreds of
 * faults between two of memtrace's samples, which must each read Pss then.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define CHUNK (1 << 20)

int main(int argc, char **argv)
{
	long steps = argc > 1 ? atol(argv[1]) / 2 : 250;
	struct timespec pause = {0, 2 * 1000 * 1000};

	for (long i = 0; i < steps; i++) {
		char *p = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		               0);
		if (p == MAP_FAILED)
			return 1;
		memset(p, 1, CHUNK);
		munmap(p, CHUNK);
		nanosleep(&pause, NULL);
	}
	return 0;
}
