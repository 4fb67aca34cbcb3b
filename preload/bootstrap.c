/* SPDX-License-Identifier: MIT */
/*
 * The bootstrap arena. dlsym() calls calloc() while memtrace is still looking
 * up the real calloc, so those few early requests are served from a static
 * buffer. Its blocks are never given back (free ignores them) and never
 * traced: they belong to the loader, not to the program. Each counts in its
 * home of the set of sampled blocks for good (mt_sample_homes), so that its
 * free or realloc never takes sampled mode's pass to the real function.
 *
 * Context: init, one thread. No locking: a compare-and-swap bump keeps it
 * correct even if another thread should come in during start-up.
 */
#include "mt.h"

_Alignas(16) uint8_t mt_bootstrap_arena[MT_BOOTSTRAP_SIZE];
static _Atomic size_t used;

void *mt_bootstrap_alloc(size_t size)
{
	size_t need = (size + 15) & ~(size_t)15;
	size_t old = atomic_load_explicit(&used, memory_order_relaxed);

	do {
		if (need > MT_BOOTSTRAP_SIZE - old)
			return NULL;
	} while (!atomic_compare_exchange_weak(&used, &old, old + need));
	atomic_fetch_add_explicit(&mt_sample_homes[mt_sample_home(mt_bootstrap_arena + old)], 1,
	                          memory_order_relaxed);
	/* static storage is zeroed: calloc's promise holds */
	return mt_bootstrap_arena + old;
}
