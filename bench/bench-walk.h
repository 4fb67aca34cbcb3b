/* SPDX-License-Identifier: MIT */
/*
 * The call-chain workload behind bench-small and bench-threads: 1000 fixed
 * paths through 32 distinct functions, each path 8 to 40 calls deep, and one
 * small malloc/free pair at the end of each walk. A profiler sees about 1000
 * genuinely different call stacks, like a real program's, instead of one
 * recursion at different depths.
 *
 * May not: do any work per pair beyond the calls, the allocation, a couple of
 * byte writes and the free, so that the tracer's cost is what dominates.
 */
#ifndef BENCH_WALK_H
#define BENCH_WALK_H

#include <stdint.h>

#include "bench-spsc.h"

#define WALK_FUNCS 32
#define WALK_PATHS 1000
#define WALK_MIN_DEPTH 8
#define WALK_MAX_DEPTH 40
#define WALK_RING 64

/* One call chain: step[i] is the function called at level i. */
struct walk_path {
	unsigned depth;
	uint8_t step[WALK_MAX_DEPTH];
};

/* One thread's walker. out/in are NULL unless blocks cross to another thread. */
struct walk {
	const struct walk_path *path; /* the chain being walked */
	unsigned level;
	uint64_t rng;
	uint64_t sum;     /* checksum of bytes written at malloc and read back at free */
	uint64_t mallocs;
	uint64_t frees;
	uint64_t handed;  /* blocks pushed to the other thread */
	struct spsc *out;
	struct spsc *in;
	void *ring[WALK_RING]; /* blocks kept alive for a while */
};

/* Fills paths[WALK_PATHS]; the same on every run and machine. */
void walk_build_paths(struct walk_path *paths);

/* Walks n randomly chosen paths, one malloc/free pair at the end of each. */
void walk_run(struct walk *w, const struct walk_path *paths, uint64_t n);

/* Frees one block: reads a byte back into the checksum first. */
void walk_release(struct walk *w, void *p);

/* Frees the blocks still held in the ring. */
void walk_finish(struct walk *w);

#endif
