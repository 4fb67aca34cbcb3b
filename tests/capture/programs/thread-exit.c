/* SPDX-License-Identifier: MIT */
/*
 * Threads come and go (200 of them, each allocating), then a thread that
 * is not main calls exit(7) while others still allocate. The status must be
 * 7, and no thread may crash on the way out.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *churn(void *arg)
{
	(void)arg;
	for (;;) {
		void *volatile p = malloc(64);
		free(p);
	}
	return NULL;
}

static void *short_lived(void *arg)
{
	void *volatile p = malloc(100 + (size_t)arg);
	free(p);
	return NULL;
}

static void *exiter(void *arg)
{
	(void)arg;
	usleep(20000);
	exit(7);
}

int main(void)
{
	pthread_t th;

	for (long i = 0; i < 200; i++) {
		pthread_create(&th, NULL, short_lived, (void *)i);
		pthread_join(th, NULL);
	}
	for (int i = 0; i < 3; i++)
		pthread_create(&th, NULL, churn, NULL);
	pthread_create(&th, NULL, exiter, NULL);
	for (;;)
		pause();
}
