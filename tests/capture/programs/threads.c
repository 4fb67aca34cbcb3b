/* SPDX-License-Identifier: MIT */
/*
 * 8 threads allocate; each frees half of its blocks itself and hands the
 * rest to the next thread, which frees all but one of them: a cross-thread
 * free path with an exactly known remainder. Prints nothing (stdio would
 * allocate a buffer of its own).
 */
#include <pthread.h>
#include <stdlib.h>

#define THREADS 8
#define BLOCKS 1000

static void *handoff[THREADS][BLOCKS / 2];
static pthread_barrier_t made, freed;
void *kept[THREADS];

static void *work(void *arg)
{
	long me = (long)arg, next = (me + 1) % THREADS;
	void *mine[BLOCKS / 2];

	for (int i = 0; i < BLOCKS; i++) {
		void *p = malloc(16 + (size_t)me * 8);
		if (i % 2)
			mine[i / 2] = p;
		else
			handoff[me][i / 2] = p;
	}
	for (int i = 0; i < BLOCKS / 2; i++)
		free(mine[i]);
	pthread_barrier_wait(&made);
	/* free the blocks the previous thread made, all but the last */
	long prev = (me + THREADS - 1) % THREADS;
	for (int i = 0; i < BLOCKS / 2 - 1; i++)
		free(handoff[prev][i]);
	kept[me] = handoff[prev][BLOCKS / 2 - 1];
	(void)next;
	pthread_barrier_wait(&freed);
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];

	pthread_barrier_init(&made, NULL, THREADS);
	pthread_barrier_init(&freed, NULL, THREADS);
	for (long i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, work, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	return 0;
}
