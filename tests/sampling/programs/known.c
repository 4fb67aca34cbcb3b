/* SPDX-License-Identifier: MIT */
/*
 * Known truths for the sampled mode's statistics (test-sampling.py).
 *
 *   known leaks   20,000 blocks of 16..4096 bytes leaked by leak_small; 10,000
 *                 more held at once and freed by hold (the peak: both sets
 *                 live); 3 blocks of 409,607 bytes (above 5 x 64 KiB) leaked
 *                 by leak_big
 *   known frees   the same families (malloc, calloc, realloc, posix_memalign,
 *                 aligned_alloc), a second thread freeing the main thread's
 *                 blocks, large blocks: everything freed
 *
 * Sizes come from a fixed generator (the test computes the same ones), and
 * nothing else allocates: no stdio.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LEAKS 20000
#define HELD  10000
#define BIG   409607

static uint64_t state = 88172645463325252u;
static void *leaked[LEAKS];

/* The test's sizes(): 16 to 4096 bytes. */
static size_t next_size(void)
{
	state = state * 6364136223846793005u + 1442695040888963407u;
	return 16 + (size_t)(state >> 33) % 4081;
}

static __attribute__((noinline)) void leak_small(void)
{
	for (int i = 0; i < LEAKS; i++)
		leaked[i] = malloc(next_size());
}

static __attribute__((noinline)) void hold(void)
{
	static void *held[HELD];

	for (int i = 0; i < HELD; i++)
		held[i] = malloc(next_size());
	for (int i = 0; i < HELD; i++)
		free(held[i]);
}

static __attribute__((noinline)) void leak_big(void)
{
	for (int i = 0; i < 3; i++)
		leaked[i] = realloc(leaked[i], BIG); /* a sampled or unsampled block becomes exact */
}

#define RING 64
static void *ring[RING];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int filled; /* ring slots the main thread filled and the other has not freed */
static int done;

/* The second thread: frees what the main thread hands it, allocates and frees its own. */
static void *freer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		while (!filled && !done)
			pthread_cond_wait(&changed, &lock);
		if (!filled && done)
			break;
		for (int i = 0; i < filled; i++) {
			free(ring[i]);
			free(malloc(next_size() + (size_t)i));
		}
		filled = 0;
		pthread_cond_signal(&changed);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

static __attribute__((noinline)) void free_all(void)
{
	pthread_t t;
	void *p;

	pthread_create(&t, NULL, freer, NULL);
	for (int round = 0; round < 2000; round++) {
		void *local[RING];
		for (int i = 0; i < RING; i++) {
			size_t s = next_size();
			switch (i % 5) {
			case 0:
				local[i] = malloc(s);
				break;
			case 1:
				local[i] = calloc(1, s);
				break;
			case 2:
				local[i] = realloc(realloc(NULL, s / 2), s);
				break;
			case 3:
				local[i] = posix_memalign(&p, 64, s) ? NULL : p;
				break;
			default:
				local[i] = aligned_alloc(32, (s + 31) & ~(size_t)31);
			}
		}
		for (int i = 0; i < RING; i += 2) {
			local[i] = realloc(local[i], next_size());
			free(local[i]);
		}
		if (round % 100 == 0)
			free(malloc(BIG + (size_t)round));
		pthread_mutex_lock(&lock);
		while (filled)
			pthread_cond_wait(&changed, &lock);
		for (int i = 1; i < RING; i += 2)
			ring[i / 2] = local[i];
		filled = RING / 2;
		pthread_cond_signal(&changed);
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_lock(&lock);
	while (filled)
		pthread_cond_wait(&changed, &lock);
	done = 1;
	pthread_cond_signal(&changed);
	pthread_mutex_unlock(&lock);
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "free-all")) {
		free_all();
		return 0;
	}
	leak_small();
	hold();
	leak_big();
	return 0;
}
