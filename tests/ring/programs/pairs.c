/* SPDX-License-Identifier: MIT */
/*
 * Temporaries for the ring's consumer, which applies a malloc and its free
 * at once when nothing comes between them (ring.c, try_pair): N / 2 blocks
 * each freed right after its malloc, then what argv[2] says, then N / 2
 * temporaries more, so that the ring rolls over it. "peak": a temporary of
 * 4 MiB, the peak (a pair that must not be applied at once). "interleave":
 * a peak of 4 MiB first, then two threads whose blocks interleave: the
 * first's 3 MiB (below the peak alone) is freed only after the second took
 * 2 MiB, the new peak of both. argv: N, the mode. CHURN_WORK: the times
 * each block is filled and read back (the pace, as churn-leak's).
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
	/* untouched: the free follows at once, in the same run of records the consumer reads */
	char *p = malloc(4 << 20);

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

/* A peak of 4 MiB made by no pair: another block comes between the first's malloc and free. */
__attribute__((noinline)) static void plain_peak(void)
{
	char *p = malloc(4 << 20), *q = malloc(16);

	sink = p;
	sink = q;
	free(p);
	free(q);
}

static int interleave(void)
{
	pthread_t first, second;
	void *held;

	plain_peak();
	sem_init(&second_go, 0, 0);
	sem_init(&first_go, 0, 0);
	if (pthread_create(&second, NULL, interleave_second, NULL) ||
	    pthread_create(&first, NULL, interleave_first, NULL))
		return 1;
	pthread_join(first, NULL);
	pthread_join(second, &held);
	free(held);
	return 0;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	const char *mode = argc > 2 ? argv[2] : "peak";

	if (getenv("CHURN_WORK"))
		work = atoi(getenv("CHURN_WORK"));
	temporaries(n / 2);
	if (strcmp(mode, "interleave") == 0) {
		if (interleave())
			return 1;
	} else {
		peak_pair();
	}
	temporaries(n / 2);
	return 0;
}
