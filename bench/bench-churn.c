/* SPDX-License-Identifier: MIT */
/*
 * bench-churn: two threads, each keeping 50,000 blocks live and replacing a
 * random one at every step (N steps per thread, default 10 million), so
 * blocks live for random lengths of time, 50,000 steps on average. Each new
 * block is allocated at the end of one of 32,768 call paths, 2 to 5 calls
 * deep through 16 functions: about 20,000 distinct stacks, met in random
 * order, where bench-small's 1000 are walked in bursts. It measures what a
 * tracer costs a program whose stacks miss every small cache and whose
 * heap is large. Usage: bench-churn [STEPS_PER_THREAD]
 *
 * Prints one line: the steps, the distinct stacks the paths make, the
 * allocator calls made (the events a tracer should record) and a checksum.
 *
 * May not: be inlined or cloned (BENCH_NOIPA): the stacks must be the ones
 * the paths describe.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "bench-common.h"

#define CHURN_FUNCS     16
#define CHURN_PATHS     32768
#define CHURN_MIN_DEPTH 2
#define CHURN_MAX_DEPTH 5
#define CHURN_LIVE      50000

/* One call path: step[i] is the function called at level i. */
struct churn_path {
	uint8_t depth;
	uint8_t step[CHURN_MAX_DEPTH];
};

struct churn {
	const struct churn_path *path; /* the path being walked */
	unsigned level;
	uint64_t rng;
	uint64_t sum; /* bytes written at malloc and read back at free */
	uint64_t mallocs, frees;
	size_t size; /* of the block the path ends in */
	void *block; /* the block it returned */
	void *live[CHURN_LIVE];
};

typedef void level_fn(struct churn *c);
static level_fn *const levels[CHURN_FUNCS];
static struct churn_path paths[CHURN_PATHS];

/* The last level allocates: every function can be the one that does. */
#define LEVEL(n)                                                                                   \
	static BENCH_NOIPA void level_##n(struct churn *c)                                         \
	{                                                                                          \
		if (++c->level < c->path->depth)                                                   \
			levels[c->path->step[c->level]](c);                                        \
		else                                                                               \
			c->block = malloc(c->size);                                                \
		c->sum += n; /* after the call: no tail call */                                    \
	}

/* clang-format off */
LEVEL(0) LEVEL(1) LEVEL(2) LEVEL(3) LEVEL(4) LEVEL(5) LEVEL(6) LEVEL(7)
LEVEL(8) LEVEL(9) LEVEL(10) LEVEL(11) LEVEL(12) LEVEL(13) LEVEL(14) LEVEL(15)

static level_fn *const levels[CHURN_FUNCS] = {
	level_0, level_1, level_2,  level_3,  level_4,  level_5,  level_6,  level_7,
	level_8, level_9, level_10, level_11, level_12, level_13, level_14, level_15,
};
/* clang-format on */

/* Each path from its own seed: the same on every run and machine. */
static void build_paths(void)
{
	for (unsigned i = 0; i < CHURN_PATHS; i++) {
		uint64_t seed = 0x636875726e000000u + i;
		struct churn_path *pa = &paths[i];

		pa->depth = (uint8_t)(CHURN_MIN_DEPTH +
		                      bench_rand(&seed) % (CHURN_MAX_DEPTH - CHURN_MIN_DEPTH + 1));
		for (unsigned l = 0; l < pa->depth; l++)
			pa->step[l] = (uint8_t)(bench_rand(&seed) % CHURN_FUNCS);
	}
}

/* The distinct stacks among the paths (short paths repeat: 256 of depth 2 exist). */
static unsigned distinct_paths(void)
{
	/* a path as depth and 4 bits a level; a bitmap, since qsort may call malloc */
	static uint8_t seen[((CHURN_MAX_DEPTH + 1) << 4 * CHURN_MAX_DEPTH) / 8];
	unsigned n = 0;

	for (unsigned i = 0; i < CHURN_PATHS; i++) {
		uint32_t k = paths[i].depth;
		for (unsigned l = 0; l < paths[i].depth; l++)
			k = k << 4 | paths[i].step[l];
		n += !(seen[k / 8] >> (k % 8) & 1);
		seen[k / 8] |= (uint8_t)(1u << (k % 8));
	}
	return n;
}

static void release(struct churn *c, void *p)
{
	c->sum += *(unsigned char *)p;
	free(p);
	c->frees++;
}

/* One step: a random slot's block is replaced by a new one from a random path. */
static BENCH_NOIPA void step(struct churn *c)
{
	uint64_t r = bench_rand(&c->rng);
	unsigned slot = (unsigned)((r >> 32) % CHURN_LIVE);
	unsigned char *p;

	if (c->live[slot])
		release(c, c->live[slot]);
	/* mostly small, a few up to 1 KiB: 8 << 0..7 bounds the spread */
	c->size = 8 + (size_t)((r >> 8) & 0xffff) % (8u << (r & 7));
	c->path = &paths[(r >> 24) % CHURN_PATHS];
	c->level = 0;
	levels[c->path->step[0]](c);
	p = c->block;
	if (!p) {
		perror("malloc");
		exit(1);
	}
	c->mallocs++;
	p[0] = (unsigned char)(r >> 40);
	bench_escape(p);
	c->live[slot] = p;
}

static uint64_t steps;

static void *worker(void *arg)
{
	struct churn *c = arg;

	for (uint64_t i = 0; i < steps; i++)
		step(c);
	for (unsigned i = 0; i < CHURN_LIVE; i++)
		if (c->live[i])
			release(c, c->live[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	static struct churn workers[2];
	pthread_t tid[2];
	uint64_t sum = 0, calls = 0;
	int err;

	steps = bench_count(argc, argv, 10000000);
	build_paths();
	for (int i = 0; i < 2; i++) {
		workers[i].rng = 1 + (uint64_t)i;
		err = pthread_create(&tid[i], NULL, worker, &workers[i]);
		if (err) {
			fprintf(stderr, "bench-churn: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(tid[i], NULL);
		sum += workers[i].sum;
		calls += workers[i].mallocs + workers[i].frees;
	}
	printf("bench-churn: steps=%" PRIu64 " threads=2 stacks=%u calls=%" PRIu64
	       " checksum=%016" PRIx64 "\n",
	       2 * steps, distinct_paths(), calls, sum);
	bench_report_rusage();
	return 0;
}
