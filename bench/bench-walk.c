/* SPDX-License-Identifier: MIT */
/*
 * Call chains for bench-small and bench-threads. STEP(n) defines 32 functions
 * that differ only in their constant; each calls the function the path names
 * for the next level, or makes the pair at the last level. Every call is
 * followed by a little work, so no call can become a tail call and every
 * level keeps its frame on the stack for the tracer's unwinder to see.
 *
 * May not: be inlined or cloned (BENCH_NOIPA); the stacks must be the ones
 * the paths describe.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench-common.h"
#include "bench-walk.h"

typedef void step_fn(struct walk *w);

static step_fn *const steps[WALK_FUNCS];

/* Blocks mostly small: 3 in 4 are 8..64 bytes, the rest 65..512. */
static size_t pick_size(uint64_t r)
{
	return (r & 3) ? 8 + (r >> 8) % 57 : 65 + (r >> 8) % 448;
}

void walk_release(struct walk *w, void *p)
{
	unsigned char *b = p;

	w->sum += b[0];
	free(p);
	w->frees++;
}

/*
 * The pair at the end of a walk. 1 in 8 blocks goes into the ring and frees
 * whatever it displaces; with a partner thread, half of the rest are handed
 * over and freed there.
 */
static BENCH_NOIPA void pair(struct walk *w)
{
	uint64_t r = bench_rand(&w->rng);
	size_t size = pick_size(r);
	unsigned char *p = malloc(size);

	if (!p) {
		perror("malloc");
		exit(1);
	}
	w->mallocs++;
	p[0] = (unsigned char)(r >> 40);
	p[size - 1] = (unsigned char)(r >> 48);
	bench_escape(p);
	w->sum += p[size - 1];

	if (((r >> 20) & 7) == 0) {
		unsigned slot = (unsigned)(r >> 24) % WALK_RING;
		void *old = w->ring[slot];

		w->ring[slot] = p;
		if (old)
			walk_release(w, old);
	} else if (w->out && ((r >> 23) & 1)) {
		if (spsc_push(w->out, p))
			w->handed++;
		else
			walk_release(w, p); /* ring full: never wait, free here */
	} else {
		walk_release(w, p);
	}

	if (w->in) {
		void *q = spsc_pop(w->in);

		if (q)
			walk_release(w, q);
	}
}

#define STEP(n)								\
	static BENCH_NOIPA void step_##n(struct walk *w)		\
	{								\
		if (++w->level < w->path->depth)			\
			steps[w->path->step[w->level]](w);		\
		else							\
			pair(w);					\
		w->sum += n; /* after the call: no tail call */		\
	}

STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)
STEP(8) STEP(9) STEP(10) STEP(11) STEP(12) STEP(13) STEP(14) STEP(15)
STEP(16) STEP(17) STEP(18) STEP(19) STEP(20) STEP(21) STEP(22) STEP(23)
STEP(24) STEP(25) STEP(26) STEP(27) STEP(28) STEP(29) STEP(30) STEP(31)

static step_fn *const steps[WALK_FUNCS] = {
	step_0, step_1, step_2, step_3, step_4, step_5, step_6, step_7,
	step_8, step_9, step_10, step_11, step_12, step_13, step_14, step_15,
	step_16, step_17, step_18, step_19, step_20, step_21, step_22, step_23,
	step_24, step_25, step_26, step_27, step_28, step_29, step_30, step_31,
};

/*
 * Each path has its own seed, so adding paths never changes the existing
 * ones. With depth >= 8 over 32 functions two paths collide with odds of
 * about 1000^2 / 32^8: the stacks are distinct.
 */
void walk_build_paths(struct walk_path *paths)
{
	for (unsigned i = 0; i < WALK_PATHS; i++) {
		uint64_t seed = 0x6d656d7472616365u + i;
		struct walk_path *pa = &paths[i];

		pa->depth = WALK_MIN_DEPTH +
			    (unsigned)(bench_rand(&seed) % (WALK_MAX_DEPTH - WALK_MIN_DEPTH + 1));
		for (unsigned l = 0; l < pa->depth; l++)
			pa->step[l] = (uint8_t)(bench_rand(&seed) % WALK_FUNCS);
	}
}

/*
 * A path is walked a few times in a row (1 to 16, 8.5 on average), the way a
 * real program allocates from the same site in a loop. Jumping to a random
 * path every time makes nearly every indirect call and deep return
 * mispredict: the bare run takes more than twice as long, and that
 * cost would hide the tracer's.
 */
void walk_run(struct walk *w, const struct walk_path *paths, uint64_t n)
{
	uint64_t i = 0;

	while (i < n) {
		uint64_t r = bench_rand(&w->rng);
		uint64_t burst = 1 + (r >> 32) % 16;

		w->path = &paths[r % WALK_PATHS];
		for (; burst && i < n; burst--, i++) {
			w->level = 0;
			steps[w->path->step[0]](w);
		}
	}
}

void walk_finish(struct walk *w)
{
	for (unsigned i = 0; i < WALK_RING; i++) {
		if (w->ring[i])
			walk_release(w, w->ring[i]);
		w->ring[i] = NULL;
	}
}
