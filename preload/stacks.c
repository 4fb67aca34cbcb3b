/* SPDX-License-Identifier: MIT */
/*
 * Call stacks: taken with libunwind, interned in a lock-free table, written
 * to the trace once per process instance.
 *
 * The table is a short list of open-addressing arrays of 64-bit stack
 * hashes. The first has 2^14 slots (128 KiB of address space); when the
 * newest is 3/4 full, the next is mapped with as many slots as all the
 * earlier ones together, so the list's total doubles, up to
 * 2^MEMTRACE_STACK_TABLE_BITS slots (the same stacks as one table of that
 * size holds). A program with few stacks reserves little of its RLIMIT_AS.
 * A stack's id is its slot number + 1 plus the slots of the arrays before
 * its own, known the moment the slot is claimed with one compare-and-swap,
 * so no thread ever waits for another, and an id never changes. Two
 * different stacks with equal 64-bit hashes would share an id; with a
 * million stacks the odds are about 1 in 3.7e7, which we accept for a
 * lookup that needs no frame comparison (docs/architecture.md).
 *
 * A lookup probes the newest array first (it holds half the stacks) and
 * then the older ones, unless a Bloom filter of every hash interned says
 * the stack is in none: a new stack then costs one probe, not one cache
 * miss per array (a torch import meets 600,000 new stacks over 7 arrays).
 * A new stack goes into the newest. Two threads that
 * meet the same new stack while the newest array fills up can put it into
 * two arrays (one saw the older array full, the other had already found a
 * free slot there): the stack then has two ids. Each thread writes the
 * STACK record of the id it claimed, and the reader takes any id that has
 * one (analyzer/replay.c keys stacks by id), so the trace stays exact; the
 * stack's events are only split between two ids.
 *
 * When tracing stops, the arrays are unmapped once no lookup is under way:
 * a lookup holds a count (table_users) from its first probe to its last. The
 * per-thread id caches are in the threads' scratch areas (or mapped beside
 * them once grown), given back by each thread (writer.c).
 *
 * Context: hot path (mt_stack_found), init, fork child, any (mt_stacks_stop).
 * May not: take a lock, allocate with malloc.
 */
#define UNW_LOCAL_ONLY
#include <errno.h>
#include <libunwind.h>
#include <string.h>
#include <sys/mman.h>

#include "mt.h"

#define FIRST_BITS 14
#define MAX_TABLES (28 - FIRST_BITS + 1) /* MEMTRACE_STACK_TABLE_BITS is at most 28 */

static _Atomic(_Atomic uint64_t *) tables[MAX_TABLES];
/* The Bloom filter: one 64-bit word per hash, three bits set in it (a cache miss, not three). */
#define BLOOM_BITS 17 /* words: 1 MiB, about 3% false positives at a million stacks */
static _Atomic uint64_t *bloom;
static _Atomic uint64_t used[MAX_TABLES];
static unsigned first_bits; /* log2 of the first array's slots */
static unsigned ntables;    /* arrays the configured size allows */
static _Atomic bool full_said, grow_failed;

/*
 * Lookups under way, counted in shards by thread (one count written by
 * every lookup of every thread was a cache line the threads of bench-churn,
 * 20,000 stacks in random order, handed to each other on each of two
 * atomic operations a lookup), and the table's state: CLOSING once tracing
 * stopped (no new lookup starts), GONE once the arrays are unmapped (by
 * whoever saw every count at 0 with CLOSING set). A lookup counts itself in
 * before it reads the state, and the stopper sets the state before it adds
 * up the counts (all sequentially consistent): either the lookup sees
 * CLOSING and keeps off the arrays, or the stopper sees it counted.
 */
#define CLOSING     1u
#define GONE        2u
#define USER_SHARDS 16
static struct {
	_Alignas(64) _Atomic uint64_t n; /* a cache line each */
} table_users[USER_SHARDS];
static _Atomic unsigned table_state;

/* Array j has 2^bits(j) slots and ids from base(j) + 1. */
static inline unsigned table_bits(unsigned j)
{
	return j ? first_bits + j - 1 : first_bits;
}

static inline uint64_t table_base(unsigned j)
{
	return j ? (uint64_t)1 << (first_bits + j - 1) : 0;
}

static inline uint64_t table_limit(unsigned j)
{
	uint64_t size = (uint64_t)1 << table_bits(j);

	return size - size / 4; /* keep probes short: at most 3/4 full */
}

static void *table_map(unsigned j)
{
	return mt_own_map(sizeof(uint64_t) << table_bits(j));
}

static inline uint64_t bloom_bits(uint64_t h)
{
	return 1ull << (h >> 46 & 63) | 1ull << (h >> 52 & 63) | 1ull << (h >> 58);
}

static inline _Atomic uint64_t *bloom_word(uint64_t h)
{
	return &bloom[h & ((1u << BLOOM_BITS) - 1)];
}

static void tables_unmap(void)
{
	if (bloom)
		mt_own_unmap((void *)bloom, sizeof(uint64_t) << BLOOM_BITS);
	bloom = NULL;
	for (unsigned j = 0; j < MAX_TABLES; j++) {
		void *t = atomic_exchange(&tables[j], NULL);
		if (t)
			mt_own_unmap(t, sizeof(uint64_t) << table_bits(j));
		atomic_store(&used[j], 0);
	}
}

/* One process instance's first array. */
static int tables_start(void)
{
	void *t = table_map(0);
	void *b = mt_own_map(sizeof(uint64_t) << BLOOM_BITS);

	if (t == MAP_FAILED || b == MAP_FAILED) {
		if (t != MAP_FAILED)
			mt_own_unmap(t, sizeof(uint64_t) << table_bits(0));
		if (b != MAP_FAILED)
			mt_own_unmap(b, sizeof(uint64_t) << BLOOM_BITS);
		return -1;
	}
	bloom = b;
	atomic_store(&tables[0], t);
	atomic_store(&full_said, false);
	atomic_store(&grow_failed, false);
	for (unsigned i = 0; i < USER_SHARDS; i++)
		atomic_store(&table_users[i].n, 0);
	atomic_store(&table_state, 0);
	return 0;
}

int mt_stacks_init(void)
{
	/* per-thread caches make repeated unwinding through the same code cheap */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	mt_unwind_init();
	first_bits =
	        mt_config.stack_table_bits < FIRST_BITS ? mt_config.stack_table_bits : FIRST_BITS;
	ntables = mt_config.stack_table_bits - first_bits + 1;
	if (tables_start() < 0) {
		mt_say("cannot map the stack table; tracing is off");
		return -1;
	}
	return 0;
}

/* Fork child: the parent's ids mean nothing here; start a fresh table. 0, or -1. */
int mt_stacks_after_fork(void)
{
	tables_unmap(); /* the child's only thread is this one: no lookup is under way */
	/* ids of the parent's table; this thread is the child's only one. A larger
	 * cache is given back rather than cleared (which would copy its pages) */
	if (mt_self.area) {
		mt_ids_release(mt_self.area);
		__builtin_memset(mt_self.area->ids_first, 0, sizeof(mt_self.area->ids_first));
	}
	mt_self.again_id = 0;
	return tables_start();
}

/* The arrays go, once, when CLOSING is set and no lookup is under way. */
static void tables_release(void)
{
	unsigned closing = CLOSING;
	int err = errno;

	for (unsigned i = 0; i < USER_SHARDS; i++)
		if (atomic_load(&table_users[i].n))
			return; /* that lookup releases them as it leaves */
	if (atomic_compare_exchange_strong(&table_state, &closing, CLOSING | GONE))
		tables_unmap();
	errno = err;
}

/*
 * Tracing stopped: no lookup starts any more, and the last one under way
 * (or this call, if none is) unmaps the arrays. Any context, any thread, any
 * number of times; async-signal-safe. The rule cache (unwind.c) is kept:
 * walks run on every event and take no count of their users.
 */
void mt_stacks_stop(void)
{
	if (!(atomic_fetch_or(&table_state, CLOSING) & CLOSING))
		tables_release();
}

/* Slow path: the first sighting of a stack in this process. */
static void write_stack(uint32_t id, int n)
{
	void *f[MT_MAX_DEPTH];
	uint32_t pystack = mt_self.area->npy ? mt_self.area->pystack : 0;
	uint8_t *rec, *q;

	mt_unwind_frames(f, n);
	mt_modules_check(); /* any module a frame points into is described first */
	rec = mt_room(16 + 4 * MT_MAX_VARINT + (size_t)n * MT_MAX_VARINT);
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
	if (pystack)
		q = mt_put_varint(q, pystack);
	mt_commit_large(rec, MT_REC_STACK, q);
}

/* No room for a new stack: said once (err: the mmap's, when a new array could not be mapped). */
static void table_full(int err)
{
	unsigned long long most = 0, have = 0;

	if (atomic_exchange(&full_said, true))
		return;
	for (unsigned j = 0; j < ntables; j++) {
		most += table_limit(j);
		have += atomic_load_explicit(&used[j], memory_order_relaxed);
	}
	if (err)
		mt_say("cannot map more of the stack table after %llu distinct stacks: %s; later "
		       "new stacks are recorded as unknown",
		       have, strerror(err));
	else
		mt_say("more than %llu distinct stacks; later new stacks are recorded as unknown "
		       "(raise MEMTRACE_STACK_TABLE_BITS)",
		       most);
	mt_rec_lost(MT_LOST_STACK_TABLE_FULL, 0);
}

/* Array j's next array, mapped if no thread has yet. False when there is none. */
static bool grow(unsigned j)
{
	_Atomic uint64_t *none = NULL;
	void *p;
	int err;

	if (atomic_load_explicit(&tables[j], memory_order_acquire))
		return true;
	if (j >= ntables) {
		table_full(0);
		return false;
	}
	if (atomic_load_explicit(&grow_failed, memory_order_relaxed))
		return false; /* said once; an mmap per new stack would cost the program */
	err = errno;
	p = table_map(j);
	if (p == MAP_FAILED) {
		atomic_store(&grow_failed, true);
		table_full(errno);
	} else if (!atomic_compare_exchange_strong(&tables[j], &none, p)) {
		mt_own_unmap(p, sizeof(uint64_t) << table_bits(j)); /* another thread's won */
	}
	errno = err;
	return p != MAP_FAILED || atomic_load(&tables[j]);
}

/*
 * Probes array j for h from slot i on: h's id if it is there, else 0 and
 * *free the first free slot (there always is one: an array is at most about
 * 3/4 full). Inline: a lookup of churn's (a third of its allocations miss
 * the thread's id cache) paid a call for each probe.
 */
static inline __attribute__((always_inline)) uint32_t probe(unsigned j, uint64_t h, uint64_t i,
                                                            uint64_t *free)
{
	_Atomic uint64_t *t = atomic_load_explicit(&tables[j], memory_order_acquire);
	uint64_t mask = ((uint64_t)1 << table_bits(j)) - 1;

	for (i &= mask;; i = (i + 1) & mask) {
		uint64_t k = atomic_load_explicit(&t[i], memory_order_relaxed);
		if (k == h)
			return (uint32_t)(table_base(j) + i + 1);
		if (!k) {
			*free = i;
			return 0;
		}
	}
}

/* The id of the stack with hash h, interning it into the newest array if new. */
static uint32_t find_or_add(uint64_t h, int n)
{
	unsigned top = 0;
	uint64_t i = 0, unused; /* i is probe's free slot: GCC cannot tell it is set before use */
	uint32_t id;

	while (top + 1 < ntables && atomic_load_explicit(&tables[top + 1], memory_order_acquire))
		top++;
	if ((id = probe(top, h, h, &i)))
		return id;
	if (top && (atomic_load_explicit(bloom_word(h), memory_order_relaxed) & bloom_bits(h)) ==
	                   bloom_bits(h))
		for (unsigned j = top; j-- > 0;)
			if ((id = probe(j, h, h, &unused)))
				return id;
	/* before the slot is claimed: a thread that looks for it next checks the older arrays */
	atomic_fetch_or_explicit(bloom_word(h), bloom_bits(h), memory_order_relaxed);
	for (;;) {
		_Atomic uint64_t *t;
		uint64_t k = 0;

		if (atomic_load_explicit(&used[top], memory_order_relaxed) >= table_limit(top)) {
			if (!grow(top + 1))
				return 0;
			if ((id = probe(++top, h, h, &i)))
				return id;
			continue;
		}
		t = atomic_load_explicit(&tables[top], memory_order_relaxed);
		if (atomic_compare_exchange_strong(&t[i], &k, h)) {
			int err = errno; /* the module check may make system calls */
			atomic_fetch_add_explicit(&used[top], 1, memory_order_relaxed);
			id = (uint32_t)(table_base(top) + i + 1);
			write_stack(id, n);
			errno = err;
			return id;
		}
		if (k == h)
			return (uint32_t)(table_base(top) + i + 1);
		if ((id = probe(top, h, i + 1, &i)))
			return id;
	}
}

/* The shared table, for as long as tracing is on (see table_users). */
static uint32_t lookup(uint64_t h, int n)
{
	_Atomic uint64_t *users = &table_users[mt_self.tid % USER_SHARDS].n;
	uint32_t id = 0;

	atomic_fetch_add(users, 1);
	if (MT_LIKELY(!(atomic_load(&table_state) & CLOSING)))
		id = find_or_add(h, n);
	atomic_fetch_sub(users, 1);
	if (MT_UNLIKELY(atomic_load(&table_state) == CLOSING))
		tables_release();
	return id;
}

void mt_ids_init(struct mt_area *area)
{
	area->ids = area->ids_first;
	area->ids_mask = MT_ID_CACHE - 1;
	area->ids_miss = 0;
}

void mt_ids_release(struct mt_area *area)
{
	if (area->ids != area->ids_first)
		mt_own_unmap(area->ids, (size_t)(area->ids_mask + 1) * sizeof(*area->ids));
	mt_ids_init(area);
}

/*
 * The id of h in the thread's id cache, else 0. Its slots are in sets of
 * MT_ID_WAYS (within one cache line), so that a thread with more hot stacks
 * than slots keeps more of its hottest: bench churn's 20,000 in random
 * order missed 34 lookups in 100 with one slot to a hash (16,384 slots),
 * 26 with two (with four, 23, but the other slots' tests and the moves cost
 * more than the misses saved). A set's first slot holds the id last found
 * there: a hit in another swaps with it, and ids_put puts a new one there.
 */
static inline uint32_t ids_find(struct mt_id_slot *set, uint64_t h)
{
	if (MT_LIKELY(set[0].hash == h))
		return (uint32_t)set[0].id;
	for (unsigned w = 1; w < MT_ID_WAYS; w++)
		if (set[w].hash == h) {
			struct mt_id_slot hit = set[w];
			set[w] = set[0];
			set[0] = hit;
			return (uint32_t)hit.id;
		}
	return 0;
}

/* The set of h in a cache of mask + 1 slots. */
static inline struct mt_id_slot *ids_set(struct mt_id_slot *ids, uint32_t mask, uint64_t h)
{
	return &ids[(unsigned)(h >> 32) & mask & ~(MT_ID_WAYS - 1u)];
}

/* A new id into the set's first slot; the set's last goes. */
static inline void ids_put(struct mt_id_slot *set, uint64_t h, uint32_t id)
{
	for (unsigned w = MT_ID_WAYS - 1; w > 0; w--)
		set[w] = set[w - 1];
	set[0].hash = h;
	set[0].id = id;
}

/*
 * Slow path: the thread's id cache missed twice as often as it has slots
 * since it was last made larger: a cache 4 times larger replaces it,
 * holding the ids of the one it replaces (each a miss and a look-up in the
 * table again otherwise). A thread with few hot stacks never gets here;
 * one with many (bench churn's 20,000 in random order missed 79 lookups in
 * 100 with 1024 slots) pays 256 KiB of its own at most. When the mapping
 * is refused, the cache stays as it is.
 */
static __attribute__((noinline)) void ids_grow(struct mt_area *area)
{
	size_t slots = (size_t)(area->ids_mask + 1) * 4;
	int err = errno;
	struct mt_id_slot *p;

	area->ids_miss = 0;
	if (slots > MT_ID_CACHE_MAX)
		return;
	p = mt_own_map(slots * sizeof(*p));
	if (p != MAP_FAILED) {
		/* each set's last first, so that its first stays first */
		for (size_t i = area->ids_mask + 1; i-- > 0;)
			if (area->ids[i].hash)
				ids_put(ids_set(p, (uint32_t)slots - 1, area->ids[i].hash),
				        area->ids[i].hash, (uint32_t)area->ids[i].id);
		if (area->ids != area->ids_first)
			mt_own_unmap(area->ids, (size_t)(area->ids_mask + 1) * sizeof(*area->ids));
		area->ids = p;
		area->ids_mask = (uint32_t)slots - 1;
	}
	errno = err;
}

/*
 * The stack's id the long way, once walked (mt_stack_walked, reusing what
 * holds of the last walk) and hashed: looked up in the thread's id cache
 * and then in the table. Notes the id for mt_unwind_again when nothing but
 * the walk made it.
 */
uint32_t mt_stack_found(uint64_t h, int n)
{
	struct mt_area *area = mt_self.area;
	struct mt_id_slot *set;
	uint32_t id;
	bool python = false;

	if (MT_UNLIKELY(!area))
		return 0; /* no scratch memory for this thread: no stack */
	area->npy = 0;
	if (MT_UNLIKELY(mt_python_on)) {
		uint64_t mixed = h; /* its address taken here only: h stays in a register */
		python = mt_python_walk(area, &mixed);
		h = mixed;
	}
	set = ids_set(area->ids, area->ids_mask, h);
	id = ids_find(set, h);
	if (!id) {
		id = lookup(h, n);
		if (id)
			ids_put(set, h, id);
		if (MT_UNLIKELY(++area->ids_miss > 2 * area->ids_mask))
			ids_grow(area);
	}
	mt_self.again_id = area->in_fallback || python ? 0 : id;
	mt_self.again_ip = mt_self.caller_ip; /* the walk's innermost state */
	mt_self.again_sp = mt_self.caller_sp;
	return id;
}
