/* SPDX-License-Identifier: MIT */
/*
 * memtrace's own anonymous mappings (stack and code tables, per-thread
 * scratch), known by address. The exit's reachability scan leaves them
 * out of the roots: they are not the program's memory, they are most of
 * what a small process has mapped writable (1.3 MiB of a traced cat's
 * 1.6), and a stale copy in them of a program pointer (the Python code
 * cache holds code objects' addresses) would make a lost block reachable.
 *
 * A fixed table claimed with a compare-and-swap: mapping happens on the
 * slow path of any thread. A mapping the full table cannot hold stays a
 * root, which can only make a block reachable, never lose one.
 *
 * Context: any (init, slow path, fork child); the reachability copy reads
 * the table (mt_own_ranges).
 */
#include <sys/mman.h>

#include "mt.h"
#include "reach.h"

#define OWN_SLOTS 1024

static struct {
	_Atomic uintptr_t lo;
	uintptr_t hi;
} own[OWN_SLOTS];

void *mt_own_map(size_t bytes)
{
	void *p = mt_real.mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return p;
	for (size_t i = 0; i < OWN_SLOTS; i++) {
		uintptr_t free_slot = 0;
		if (atomic_load_explicit(&own[i].lo, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&own[i].lo, &free_slot, (uintptr_t)p)) {
			own[i].hi = (uintptr_t)p + bytes;
			break;
		}
	}
	return p;
}

void mt_own_unmap(void *p, size_t bytes)
{
	/* out of the table first: once unmapped, the range may be the program's */
	for (size_t i = 0; i < OWN_SLOTS; i++) {
		if (atomic_load_explicit(&own[i].lo, memory_order_relaxed) == (uintptr_t)p) {
			own[i].hi = 0;
			atomic_store(&own[i].lo, 0);
			break;
		}
	}
	mt_real.munmap(p, bytes);
}

void mt_own_ranges(struct mt_reach_range *out, size_t room, size_t *n)
{
	size_t k = 0;

	for (size_t i = 0; i < OWN_SLOTS && k < room; i++) {
		uintptr_t lo = atomic_load(&own[i].lo), hi = own[i].hi;
		if (lo && hi > lo)
			out[k++] = (struct mt_reach_range){lo, hi};
	}
	*n += k;
}
