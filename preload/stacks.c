/* SPDX-License-Identifier: MIT */
/*
 * Call stacks: taken with libunwind, interned in a lock-free table, written
 * to the trace once per process instance.
 *
 * The table is an open-addressing array of 64-bit stack hashes; a stack's id
 * is its slot number + 1, known the moment the slot is claimed with one
 * compare-and-swap, so no thread ever waits for another. Two different stacks
 * with equal 64-bit hashes would share an id; with a million stacks the odds
 * are about 1 in 3.7e7, which we accept for a lookup that needs no frame
 * comparison (docs/architecture.md).
 *
 * Context: hot path (mt_stack_current), init, fork child.
 * May not: take a lock, allocate with malloc.
 */
#define UNW_LOCAL_ONLY
#include <errno.h>
#include <libunwind.h>
#include <sys/mman.h>

#include "mt.h"

static _Atomic uint64_t *table;
static uint64_t mask;
static _Atomic uint64_t used;
static uint64_t limit;
static _Atomic bool full_said;

static int table_map(void)
{
	size_t bytes = ((size_t)1 << mt_config.stack_table_bits) * sizeof(uint64_t);
	void *p = mt_real.mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	table = p;
	mask = ((uint64_t)1 << mt_config.stack_table_bits) - 1;
	limit = mask - mask / 4; /* keep probes short: at most 3/4 full */
	atomic_store(&used, 0);
	return 0;
}

int mt_stacks_init(void)
{
	/* per-thread caches make repeated unwinding through the same code cheap */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	mt_unwind_init();
	if (table_map() < 0) {
		mt_say("cannot map the stack table; tracing is off");
		return -1;
	}
	return 0;
}

/* Fork child: the parent's ids mean nothing here; start a fresh table. */
void mt_stacks_after_fork(void)
{
	mt_real.munmap((void *)table, (mask + 1) * sizeof(uint64_t));
	if (mt_self.area) /* ids of the parent's table; this thread is the child's only one */
		__builtin_memset(mt_self.area->ids, 0, sizeof(mt_self.area->ids));
	if (table_map() < 0)
		mt_disable("cannot map the stack table in a forked child", 0);
}

/* Slow path: the first sighting of a stack in this process. */
static void write_stack(uint32_t id, int n)
{
	void *f[MT_MAX_DEPTH];
	uint8_t *rec, *q;

	mt_unwind_frames(f, n);
	mt_modules_check(); /* any module a frame points into is described first */
	rec = mt_room(16 + 2 * MT_MAX_VARINT + (size_t)n * MT_MAX_VARINT);
	if (!rec)
		return;
	q = mt_put_varint(rec + 4, id);
	q = mt_put_varint(q, mt_module_gen);
	q = mt_put_varint(q, (uint64_t)n);
	for (int i = 0; i < n; i++) {
		uint64_t prev = i ? (uintptr_t)f[i - 1] : 0;
		uint64_t v = (uintptr_t)f[i];
		q = mt_put_varint(q, i ? mt_zigzag((int64_t)(v - prev)) : v);
	}
	mt_commit_large(rec, MT_REC_STACK, q);
}

static void table_full(void)
{
	if (!atomic_exchange(&full_said, true)) {
		mt_say("more than %llu distinct stacks; later new stacks are recorded as unknown "
		       "(raise MEMTRACE_STACK_TABLE_BITS)",
		       (unsigned long long)limit);
		mt_rec_lost(MT_LOST_STACK_TABLE_FULL, 0);
	}
}

static uint32_t lookup(uint64_t h, int n);

/* Hot path: the id of the stack that called the interposed function. */
uint32_t mt_stack_current(void)
{
	uint64_t h;
	int n = mt_unwind((int)mt_config.depth, &h);
	struct mt_area *area = mt_self.area;
	unsigned c = (unsigned)(h >> 32) % MT_ID_CACHE;
	uint32_t id;

	if (MT_UNLIKELY(!area))
		return 0; /* no scratch memory for this thread: no stack */
	if (area->ids[c].hash == h)
		return (uint32_t)area->ids[c].id;
	id = lookup(h, n);
	if (id) {
		area->ids[c].hash = h;
		area->ids[c].id = id;
	}
	return id;
}

/* The shared table: the id of the stack with hash h, interning it if new. */
static uint32_t lookup(uint64_t h, int n)
{
	uint64_t i;

	for (i = h & mask;; i = (i + 1) & mask) {
		uint64_t k = atomic_load_explicit(&table[i], memory_order_relaxed);
		if (k == h)
			return (uint32_t)(i + 1);
		if (k)
			continue;
		if (atomic_load_explicit(&used, memory_order_relaxed) >= limit) {
			table_full();
			return 0;
		}
		if (!atomic_compare_exchange_strong(&table[i], &k, h)) {
			if (k == h)
				return (uint32_t)(i + 1);
			continue;
		}
		atomic_fetch_add_explicit(&used, 1, memory_order_relaxed);
		int err = errno; /* the module check may make system calls */
		write_stack((uint32_t)(i + 1), n);
		errno = err;
		return (uint32_t)(i + 1);
	}
}
