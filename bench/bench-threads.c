/* SPDX-License-Identifier: MIT */
/*
 * bench-threads: bench-small's walk on two threads at once, N pairs each
 * (default 10 million), with cross-thread frees: about 7 in 16 blocks are
 * handed to the other thread through a lock-free ring and freed there. It
 * measures what a tracer costs when threads allocate concurrently and free
 * each other's blocks. Usage: bench-threads [PAIRS_PER_THREAD]
 *
 * Which blocks cross depends on timing (a full ring means a local free), so
 * the "handed" count varies between runs; the checksum does not.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "bench-common.h"
#include "bench-walk.h"

static struct walk_path paths[WALK_PATHS];
static struct spsc rings[2];
static struct walk walkers[2];
static uint64_t pairs;

/* Thread i hands blocks out on rings[i] and takes the other's from rings[1 - i]. */
static void *worker(void *arg)
{
	struct walk *w = arg;

	walk_run(w, paths, pairs);
	walk_finish(w);
	atomic_store_explicit(&w->out->done, true, memory_order_release);

	/*
	 * Drain until the other side is done and its ring empty. done is read
	 * before the pop: once it reads true (pairs with the release above, on the
	 * other thread) every push is visible, so an empty pop means empty.
	 */
	for (;;) {
		bool done = atomic_load_explicit(&w->in->done, memory_order_acquire);
		void *p = spsc_pop(w->in);

		if (p)
			walk_release(w, p);
		else if (done)
			break;
		else
			sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t tid[2];
	uint64_t sum = 0, calls = 0, handed = 0;
	int err;

	pairs = bench_count(argc, argv, 10000000);
	walk_build_paths(paths);
	for (int i = 0; i < 2; i++) {
		walkers[i].rng = 1 + (uint64_t)i;
		walkers[i].out = &rings[i];
		walkers[i].in = &rings[1 - i];
	}
	for (int i = 0; i < 2; i++) {
		err = pthread_create(&tid[i], NULL, worker, &walkers[i]);
		if (err) {
			fprintf(stderr, "bench-threads: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(tid[i], NULL);
		sum += walkers[i].sum;
		calls += walkers[i].mallocs + walkers[i].frees;
		handed += walkers[i].handed;
	}

	printf("bench-threads: pairs=%" PRIu64 " threads=2 calls=%" PRIu64 " handed=%" PRIu64
	       " checksum=%016" PRIx64 "\n", 2 * pairs, calls, handed, sum);
	bench_report_rusage();
	return 0;
}
