/* SPDX-License-Identifier: MIT */
/*
 * Temporaries for the ring's consumer, which applies a malloc and its free
 * at once when nothing comes between them (ring.c, try_pair): N / 2 blocks
 * each freed right after its malloc; then a temporary of 4 MiB, the peak
 * (a pair that must not be applied at once); then two threads whose blocks
 * interleave: the first's 3 MiB (below the peak alone) is freed only after
 * the second took 2 MiB, the new peak of both; then N / 2 temporaries more,
 * so that the ring rolls over the peak. argv: N. CHURN_WORK: the times each
 * block is filled and read back (the pace, as churn-leak's).
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;
static int work = 1;
static sem_t second_go, first_go;

__attribute__((noinline)) static void temporaries(long n)
{
	for (long i = 0; i < n; i++) {
		size_t size = 16 + (size_t)(i % 200);
		unsigned char *p = malloc(size);
		unsigned sum = 0;
		for (int w = 0; w < work; w++) {
			memset(p, (int)i + w, size);
			for (size_t j = 0; j < size; j++)
				sum += p[j] * (unsigned)j;
		}
		sink = (void *)(uintptr_t)sum;
		free(p);
	}
}

__attribute__((noinline)) static void peak_pair(void)
{
	char *p = malloc(4 << 20);

	memset(p, 1, 4 << 20);
	sink = p;
	free(p);
}

__attribute__((noinline)) static void *interleave_first(void *arg)
{
	char *p = malloc(3 << 20);

	(void)arg;
	sink = p;
	sem_post(&second_go);
	sem_wait(&first_go);
	free(p);
	return NULL;
}

__attribute__((noinline)) static void *interleave_second(void *arg)
{
	char *p;

	(void)arg;
	sem_wait(&second_go);
	p = malloc(2 << 20);
	sink = p;
	sem_post(&first_go);
	return p;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	pthread_t first, second;
	void *held;

	if (getenv("CHURN_WORK"))
		work = atoi(getenv("CHURN_WORK"));
	temporaries(n / 2);
	peak_pair();
	sem_init(&second_go, 0, 0);
	sem_init(&first_go, 0, 0);
	if (pthread_create(&second, NULL, interleave_second, NULL) ||
	    pthread_create(&first, NULL, interleave_first, NULL))
		return 1;
	pthread_join(first, NULL);
	pthread_join(second, &held);
	free(held);
	temporaries(n / 2);
	return 0;
}
