/* SPDX-License-Identifier: MIT */
/*
 * Two threads hand one block back and forth ROUNDS times (default 100000):
 * the main thread allocates 48 bytes and posts the address, the other
 * thread frees it and says so, and the main thread's next malloc at once
 * takes the same address back from the arena (run with the tcache off and
 * one arena: GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1).
 * Each allocation follows, within a few hundred instructions, a free of its
 * address in the other thread: the closest two threads' events on one
 * address can come. Prints how many allocations reused the freed address.
 * Usage: ping-pong [ROUNDS]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static _Atomic(void *) posted;
static _Atomic int freed;

static void *freer(void *arg)
{
	long rounds = (long)arg;

	for (long i = 0; i < rounds; i++) {
		void *p;
		while (!(p = atomic_load_explicit(&posted, memory_order_acquire)))
			;
		atomic_store_explicit(&posted, NULL, memory_order_relaxed);
		free(p);
		atomic_store_explicit(&freed, 1, memory_order_release);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 100000, reused = 0;
	void *last = NULL;
	pthread_t th;

	if (pthread_create(&th, NULL, freer, (void *)rounds))
		return 1;
	for (long i = 0; i < rounds; i++) {
		void *p = malloc(48);
		if (!p)
			return 1;
		reused += p == last;
		last = p;
		atomic_store_explicit(&freed, 0, memory_order_relaxed);
		atomic_store_explicit(&posted, p, memory_order_release);
		while (!atomic_load_explicit(&freed, memory_order_acquire))
			;
	}
	pthread_join(th, NULL);
	printf("reused %ld of %ld\n", reused, rounds);
	return 0;
}
