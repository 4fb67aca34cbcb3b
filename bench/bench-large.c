/* SPDX-License-Identifier: MIT */
/*
 * bench-large: N large allocations (default 300,000), 64 KiB to 64 MiB with
 * every power of two equally likely, around and above glibc's mmap threshold.
 * Each block gets its first page memset and its last byte written, then is
 * freed; eight stay alive at a time. The allocator's own cost (mmap, munmap,
 * page faults) is high here, so this shows a tracer's fixed cost per event
 * against an expensive call. Usage: bench-large [ALLOCATIONS]
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench-common.h"

#define LIVE 8
#define PAGE 4096

int main(int argc, char **argv)
{
	unsigned char *live[LIVE] = { 0 };
	uint64_t rng = 4, sum = 0, calls = 0;
	uint64_t n = bench_count(argc, argv, 300000);

	for (uint64_t i = 0; i < n; i++) {
		uint64_t r = bench_rand(&rng);
		unsigned shift = 16 + (unsigned)(r % 10); /* [2^shift, 2^(shift+1)): 64 KiB .. 64 MiB */
		size_t size = ((size_t)1 << shift) + (size_t)((r >> 8) % ((uint64_t)1 << shift));
		unsigned slot = (unsigned)(r >> 40) % LIVE;
		unsigned char *p = malloc(size);

		if (!p) {
			perror("malloc");
			return 1;
		}
		calls++;
		memset(p, (int)(r >> 48), PAGE);
		p[size - 1] = (unsigned char)(r >> 56);
		bench_escape(p);
		sum += p[0] + p[size - 1];
		if (live[slot]) {
			free(live[slot]);
			calls++;
		}
		live[slot] = p;
	}
	for (unsigned i = 0; i < LIVE; i++) {
		if (live[i]) {
			free(live[i]);
			calls++;
		}
	}

	printf("bench-large: allocations=%" PRIu64 " calls=%" PRIu64 " checksum=%016" PRIx64 "\n",
	       n, calls, sum);
	bench_report_rusage();
	return 0;
}
