/* SPDX-License-Identifier: MIT */
/*
 * bench-realloc: buffers grown by realloc from a few bytes to 1 MiB, the way
 * vectors and string builders grow: half of them double, half grow by small
 * increments (16 bytes to 4 KiB). Four buffers grow interleaved so a realloc
 * cannot always extend in place. Runs until N reallocs (default 1 million).
 * Usage: bench-realloc [REALLOCS]
 *
 * A tracer sees each realloc as one event that frees one address and
 * allocates another, often across glibc's mmap threshold (mremap above it).
 */
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>

#include "bench-common.h"

#define LIVE 4
#define LIMIT (1u << 20)

struct buffer {
	unsigned char *p;
	size_t size;
	bool doubling;
};

static uint64_t mallocs, reallocs, frees, sum;

static void start(struct buffer *b, uint64_t r)
{
	b->size = 8 + (r >> 8) % 120;
	b->doubling = (r >> 16) & 1;
	b->p = malloc(b->size);
	if (!b->p) {
		perror("malloc");
		exit(1);
	}
	mallocs++;
	b->p[0] = (unsigned char)(r >> 40);
	b->p[b->size - 1] = 1;
}

/* Reads back the first byte, written at malloc: realloc must have kept it. */
static void finish(struct buffer *b)
{
	bench_escape(b->p);
	sum += b->p[0];
	free(b->p);
	frees++;
	b->p = NULL;
}

int main(int argc, char **argv)
{
	struct buffer bufs[LIVE];
	uint64_t rng = 3;
	uint64_t n = bench_count(argc, argv, 1000000);

	/*
	 * Fixed heap policy. By default glibc trims the heap top and moves its
	 * mmap threshold as blocks come and go, and here the result hinges on
	 * whatever else sits on the heap: one long-lived block from a preloaded
	 * tracer once made the bare run 3x slower than the traced one (5x the
	 * page faults). A fixed trim threshold also fixes the mmap threshold
	 * (glibc stops adjusting both), so every run gets the same policy.
	 */
	mallopt(M_TRIM_THRESHOLD, 256 << 20);

	for (int i = 0; i < LIVE; i++)
		start(&bufs[i], bench_rand(&rng));

	while (reallocs < n) {
		uint64_t r = bench_rand(&rng);
		struct buffer *b = &bufs[r % LIVE];
		size_t size = b->doubling ? 2 * b->size : b->size + 16 + (r >> 24) % 4081;
		unsigned char *q;

		if (size > LIMIT) {
			finish(b);
			start(b, r);
			continue;
		}
		q = realloc(b->p, size);
		if (!q) {
			perror("realloc");
			exit(1);
		}
		reallocs++;
		q[size - 1] = (unsigned char)r; /* touch the new end */
		bench_escape(q);
		sum += q[size - 1];
		b->p = q;
		b->size = size;
	}
	for (int i = 0; i < LIVE; i++)
		finish(&bufs[i]);

	printf("bench-realloc: reallocs=%" PRIu64 " calls=%" PRIu64 " checksum=%016" PRIx64 "\n",
	       reallocs, mallocs + reallocs + frees, sum);
	bench_report_rusage();
	return 0;
}
