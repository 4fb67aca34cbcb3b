/* SPDX-License-Identifier: MIT */
/*
 * Per-thread arenas: 8 worker threads take turns, each with 40 MiB of
 * temporaries (640 blocks of 64 KiB, under glibc's mmap threshold), and
 * each keeps a small result allocated after them, as a cache entry would be.
 * glibc gives every thread that mallocs while the others still run an arena
 * of its own, and the result on top of each arena's freed temporaries stops
 * it from shrinking: 8 arenas of 40 MiB for a live peak of 40 MiB. Under
 * MALLOC_ARENA_MAX=1 every thread shares the main heap, each turn reuses the
 * last turn's free memory, and the heap stays at 40 MiB.
 *
 * It then holds still for 200 ms so that memtrace's sampler (every 10 ms)
 * sees the arenas, and prints glibc's own total (mallinfo2's arena) with
 * write(2), allocating nothing.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS 8
#define BLOCKS  640
#define BLOCK   (64 << 10)
#define RESULT  64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int turn, done;
static char *results[THREADS];

static void work(int me)
{
	static char *tmp[BLOCKS];

	for (int i = 0; i < BLOCKS; i++) {
		tmp[i] = malloc(BLOCK);
		memset(tmp[i], me, BLOCK);
	}
	results[me] = malloc(RESULT); /* above the temporaries in this thread's arena */
	memset(results[me], me, RESULT);
	for (int i = 0; i < BLOCKS; i++)
		free(tmp[i]);
}

static void *worker(void *arg)
{
	int me = (int)(long)arg;

	pthread_mutex_lock(&lock);
	while (turn != me)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
	work(me);
	pthread_mutex_lock(&lock);
	turn++;
	done++;
	pthread_cond_broadcast(&changed);
	/* alive until all are done, so no thread inherits another's arena */
	while (done < THREADS)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	struct timespec hold = {0, 200 * 1000 * 1000};
	struct mallinfo2 mi;
	char line[96];
	int n;

	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i))
			return 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	nanosleep(&hold, NULL);
	mi = mallinfo2();
	n = snprintf(line, sizeof(line), "arena %zu\n", mi.arena);
	if (write(STDOUT_FILENO, line, (size_t)n) != n)
		return 1;
	return 0;
}
