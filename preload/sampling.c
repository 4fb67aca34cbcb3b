/* SPDX-License-Identifier: MIT */
/*
 * Sampled mode (MEMTRACE_SAMPLING, docs/sampling.md): which blocks of the
 * malloc family are recorded, and the set of the recorded ones' addresses,
 * so that a free is recorded exactly when its block's allocation was.
 *
 * Every byte allocated is a sampling point with probability 1/T: each thread
 * counts down an exponentially distributed number of bytes (mean T), and the
 * allocation that takes it to zero or below is recorded; a block of size s
 * is so recorded with probability 1 - exp(-s/T), which the analyzer divides
 * by. Blocks of at least mt_sampling_exact_above(T) bytes are always
 * recorded and leave the countdown alone (a memoryless process does not
 * notice the bytes it was not shown).
 *
 * The set: 2^SET_BITS buckets of one cache line, seven address slots and a
 * count of the addresses whose home is this bucket but which live in a
 * later one (the home was full when they came); beside it, a count of
 * each home's addresses, two bytes each (32 KiB that stay in cache). A free
 * reads its home's count, inline: for the free of a block that was not
 * sampled, that load is all (the buckets' slots took 63 instructions a
 * free on bench small). Only then does it look at its home bucket, and
 * further while the moved count is not zero. The bootstrap arena's blocks
 * (bootstrap.c) count in their homes for good, so that their free, which
 * must not reach the real one, never passes. Insertions claim a zero slot
 * with a compare-and-swap; the only thread that removes an address is the
 * one freeing it, so an address is never in two slots.
 *
 * Context: hot path (mt_sample_draw, mt_sample_keep, mt_sample_forget_slow);
 * init (mt_sampling_init). May not: lock, allocate with malloc, change errno.
 */
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mt.h"

#define SLOTS     7
#define MAX_PROBE 64

struct bucket {
	_Atomic uintptr_t addr[SLOTS];
	_Atomic uint64_t moved; /* addresses of this home that live in a later bucket */
} __attribute__((aligned(64)));

static struct bucket *set;
_Atomic uint16_t mt_sample_homes[1 << MT_SAMPLE_SET_BITS];
uint64_t mt_sample_exact;
uint64_t mt_pass_limit;

/* Init: the set, mapped once; its pages come as the addresses spread over them. */
int mt_sampling_init(void)
{
	size_t bytes = sizeof(struct bucket) << MT_SAMPLE_SET_BITS;
	void *p;

	if (!mt_config.sampling)
		return 0;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
	         -1, 0);
	if (p == MAP_FAILED) {
		mt_say("cannot map the table of sampled blocks (%zu bytes)", bytes);
		return -ENOMEM;
	}
	set = p;
	mt_sample_exact = mt_sampling_exact_above(mt_config.sampling);
	/* the pass calls them untested (the rest of mt_real, as their traced halves do) */
	if (mt_real.malloc && mt_real.free && mt_real.calloc && mt_real.realloc)
		mt_pass_limit = mt_sample_exact + 1;
	return 0;
}

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

/*
 * A thread's first draw. MEMTRACE_SEED makes a run reproducible: the main
 * thread's stream depends on the seed and the process instance alone (a
 * forked child's is not its parent's again), another thread's on its
 * distance from the main thread's id as well. The thread may not know its
 * id yet: it has written nothing (the writer asks the same way).
 */
static uint64_t seed(struct mt_thread *t)
{
	uint64_t s;

	if (!t->tid)
		t->tid = (uint32_t)syscall(SYS_gettid);
	s = mt_config.seed_set
	            ? mt_config.seed + (uint64_t)(t->tid - (uint32_t)mt_pid) +
	                      ((uint64_t)mt_instance << 32)
	            : mt_monotonic_ns() ^ (uint64_t)t->tid << 32 ^ (uint64_t)(uintptr_t)t;
	s = splitmix(s);
	return s ? s : 1;
}

/* ln(x) for x in (0, 1]: x = m 2^e, m in [sqrt(1/2), sqrt(2)), ln m by atanh's series. */
static double ln(double x)
{
	union {
		double d;
		uint64_t u;
	} v = {x};
	int e = (int)((v.u >> 52) & 0x7ff) - 1023;
	double z, z2, sum = 0;

	v.u = (v.u & ~(0x7ffull << 52)) | 1023ull << 52; /* m in [1, 2) */
	if (v.d > 1.4142135623730951) {
		v.d *= 0.5;
		e++;
	}
	z = (v.d - 1) / (v.d + 1); /* |z| < 0.172: 9 terms leave < 1e-16 */
	z2 = z * z;
	for (int k = 17; k >= 1; k -= 2)
		sum = sum * z2 + 1.0 / k;
	return e * 0.6931471805599453 + 2 * z * sum;
}

/* Bytes to the next sampling point: exponential with mean T, at least 1. */
static int64_t draw(struct mt_thread *t)
{
	uint64_t x = t->sample_rng;
	double u, d;

	x ^= x << 13; /* xorshift64 */
	x ^= x >> 7;
	x ^= x << 17;
	t->sample_rng = x;
	u = (double)((x >> 11) + 1) * 0x1p-53; /* (0, 1] */
	d = -ln(u) * (double)mt_config.sampling;
	return d < 1 ? 1 : d > 0x1p62 ? INT64_MAX : (int64_t)d;
}

/*
 * The countdown reached zero or below with an allocation of size bytes: the
 * allocation is sampled, and the countdown starts again after it. On a
 * thread's first allocation the countdown was never drawn: it is drawn now,
 * and the allocation counted against it.
 */
bool mt_sample_draw(struct mt_thread *t, size_t size)
{
	if (MT_UNLIKELY(!t->sample_rng)) {
		t->sample_rng = seed(t);
		t->sample_left = draw(t) - (int64_t)size;
		if (t->sample_left > 0)
			return false;
	}
	t->sample_left = draw(t);
	return true;
}

/* A recorded block: its address goes into the set; false when the set is full. */
bool mt_sample_keep(void *p)
{
	uintptr_t a = (uintptr_t)p;
	size_t h = mt_sample_home(p), mask = ((size_t)1 << MT_SAMPLE_SET_BITS) - 1;

	for (size_t i = 0; i < MAX_PROBE; i++) {
		struct bucket *b = &set[(h + i) & mask];
		for (int s = 0; s < SLOTS; s++) {
			uintptr_t zero = 0;
			if (atomic_load_explicit(&b->addr[s], memory_order_relaxed))
				continue;
			/* before the address is visible: a free that finds it not at
			 * home must know to look further */
			if (i)
				atomic_fetch_add_explicit(&set[h].moved, 1, memory_order_relaxed);
			/* relaxed: the program's own hand-over of the block to the thread
			 * that frees it orders this store before that free's load */
			if (atomic_compare_exchange_strong_explicit(&b->addr[s], &zero, a,
			                                            memory_order_relaxed,
			                                            memory_order_relaxed)) {
				atomic_fetch_add_explicit(&mt_sample_homes[h], 1,
				                          memory_order_relaxed);
				return true;
			}
			if (i)
				atomic_fetch_sub_explicit(&set[h].moved, 1, memory_order_relaxed);
		}
	}
	/* with the stop record, called before the block's own: a trace without one reads as a
	 * process killed, its blocks live at death. ENOMEM: the table's room is what ran out. */
	mt_writer_stop("the table of sampled blocks is full (MEMTRACE_SAMPLING too small)", ENOMEM);
	return false;
}

/* A free: true (and the address gone from the set) when its block was recorded. */
bool mt_sample_forget_slow(void *p)
{
	uintptr_t a = (uintptr_t)p;
	size_t h = mt_sample_home(p), mask = ((size_t)1 << MT_SAMPLE_SET_BITS) - 1;

	for (size_t i = 0; i < MAX_PROBE; i++) {
		struct bucket *b = &set[(h + i) & mask];
		for (int s = 0; s < SLOTS; s++) {
			if (atomic_load_explicit(&b->addr[s], memory_order_relaxed) != a)
				continue;
			/* cleared before the real free gives the address back to malloc */
			atomic_store_explicit(&b->addr[s], 0, memory_order_relaxed);
			atomic_fetch_sub_explicit(&mt_sample_homes[h], 1, memory_order_relaxed);
			if (i)
				atomic_fetch_sub_explicit(&set[h].moved, 1, memory_order_relaxed);
			return true;
		}
		if (!atomic_load_explicit(&set[h].moved, memory_order_relaxed))
			return false;
	}
	return false;
}
