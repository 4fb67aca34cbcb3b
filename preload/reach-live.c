/* SPDX-License-Identifier: MIT */
/*
 * The copy's live blocks, rebuilt from the trace (docs/reachability.md).
 *
 * The records of the exiting instance, and of each ancestor it was forked
 * from up to that fork (a forked child starts with its parent's heap), are
 * read from the file itself: every byte any thread wrote is in the page
 * cache. Threads write their own chunks, so events are not in time order
 * across chunks; an address's state is that of its latest event by time,
 * which needs no sort: a table keyed by address keeps the latest event
 * seen. Events after the snapshot (other threads of the parent run on) are
 * left out. A long list of chunks is read on two cores (in_two below).
 *
 * Context: the copy (reach.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "memtrace/trace-format.h"
#include "reach.h"

/* An address's latest host event: size with ALIVE set while the block lives. */
struct slot {
	uint64_t addr, time, size;
};
#define ALIVE (1ull << 63)

/*
 * Events wait AHEAD places in a queue while their slots are fetched: the
 * table of a churned heap (a hundred thousand blocks, freed in random
 * order) is megabytes, and each lookup a cache miss that the ones queued
 * behind it would otherwise wait out one at a time.
 */
#define AHEAD 8
struct event {
	uint64_t addr, time, size; /* size with ALIVE set for an allocation */
	uint64_t hash;             /* slot_hash(addr): its slot, whatever the table's size then */
};

struct table {
	struct slot *s;
	size_t cap, n;             /* cap a power of two; n used slots */
	struct event queue[AHEAD]; /* a ring: queued events from head on */
	unsigned head, queued;
	bool last_alloc; /* the newest queued event is an allocation of this chunk's */
};

struct instance {
	uint64_t cutoff; /* 0: not in the chain */
	uint64_t start;
	uint32_t parent;
	uint8_t origin;
	bool seen;
};

/*
 * Neighbouring blocks get neighbouring slots, so that a heap filled in
 * address order fills the table in order too (an insert is then no cache
 * miss); each 256 MiB region of the address space starts at a scattered
 * slot, so that the heap, the arenas and the mappings do not pile up.
 */
static uint64_t slot_hash(uint64_t addr)
{
	return (addr >> 4) + (addr >> 28) * 0x9e3779b97f4a7c15u;
}

static size_t slot_of(uint64_t addr, size_t cap)
{
	return slot_hash(addr) & (cap - 1);
}

static bool table_grow(struct table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1u << 10; /* a short process: 24 KiB to read through */
	struct slot *s = mt_reach_map(cap * sizeof(*s));

	if (!s)
		return false;
	for (size_t i = 0; i < t->cap; i++) {
		const struct slot *o = &t->s[i];
		if (!o->addr)
			continue;
		size_t j = slot_of(o->addr, cap);
		while (s[j].addr)
			j = (j + 1) & (cap - 1);
		s[j] = *o;
	}
	if (t->s)
		mt_reach_unmap(t->s, t->cap * sizeof(*t->s));
	t->s = s;
	t->cap = cap;
	return true;
}

/* A host event: the address's state if it is the latest. */
static __attribute__((noinline)) bool apply(struct table *t, const struct event *e)
{
	uint64_t addr = e->addr, time = e->time;
	bool alive = e->size & ALIVE;
	size_t j;

	if (2 * (t->n + 1) > t->cap && !table_grow(t))
		return false;
	j = e->hash & (t->cap - 1);
	while (t->s[j].addr && t->s[j].addr != addr)
		j = (j + 1) & (t->cap - 1);
	if (!t->s[j].addr) {
		t->n++;
	} else if (time < t->s[j].time || (time == t->s[j].time && !alive)) {
		/* an older event (or a free at the tick of the allocation after it) */
		return true;
	}
	t->s[j] = (struct slot){addr, time, alive ? e->size : 0};
	return true;
}

/* Applies the queued events, oldest first; false when the table cannot grow. */
static bool flush(struct table *t)
{
	for (; t->queued; t->queued--, t->head = (t->head + 1) % AHEAD)
		if (!apply(t, &t->queue[t->head]))
			return false;
	return true;
}

/* An event (addr, time, size) queued, its slot fetched, the oldest applied when full. */
static inline __attribute__((always_inline)) bool enqueue(struct table *t, uint64_t addr,
                                                          uint64_t time, uint64_t size)
{
	uint64_t hash = slot_hash(addr);

	if (t->queued == AHEAD) {
		if (!apply(t, &t->queue[t->head]))
			return false;
		t->head = (t->head + 1) % AHEAD;
		t->queued--;
	}
	if (t->cap)
		__builtin_prefetch(&t->s[hash & (t->cap - 1)], 1);
	t->queue[(t->head + t->queued++) % AHEAD] = (struct event){addr, time, size, hash};
	return true;
}

/*
 * A host event on addr at time: queued, its slot fetched, the oldest applied
 * when full. A free of the block the same thread allocated just before (a
 * temporary: most of a busy program's blocks) takes that allocation back
 * out of the queue, and neither reaches the table: whatever the address's
 * state before them, every event of it before the allocation ended it dead,
 * and the free ends it dead again.
 */
static inline __attribute__((always_inline)) bool event(struct table *t, uint64_t addr,
                                                        uint64_t time, bool alive, uint64_t size)
{
	if (!addr)
		return true;
	if (!alive && t->last_alloc && t->queue[(t->head + t->queued - 1) % AHEAD].addr == addr) {
		t->queued--;
		t->last_alloc = false;
		return true;
	}
	t->last_alloc = alive;
	return enqueue(t, addr, time, alive ? size | ALIVE : 0);
}

struct cur {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t u(struct cur *c)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (c->p >= c->end) {
			c->bad = true;
			return 0;
		}
		uint8_t b = *c->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	c->bad = true;
	return 0;
}

/* The most a short record's fields take: four varints of ten bytes. */
#define SHORT_MAX (4 * MT_MAX_VARINT)

/*
 * A uleb with no bound check: at most MT_MAX_VARINT bytes are read, whatever
 * they hold. One and two bytes (most deltas of time, address and size) take
 * no loop.
 */
static inline uint64_t fast_u(const uint8_t **pp)
{
	const uint8_t *p = *pp;
	uint64_t v = p[0];

	if (v < 0x80) {
		*pp = p + 1;
		return v;
	}
	v = (v & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7;
	if (p[1] < 0x80) {
		*pp = p + 2;
		return v;
	}
	p += 2;
	for (unsigned shift = 14; shift < 64; shift += 7) {
		uint8_t b = *p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	*pp = p;
	return v;
}

static uint64_t z(struct cur *c)
{
	uint64_t v = u(c);
	return (v >> 1) ^ -(v & 1);
}

/* Record types whose first field is a dt on the chunk's time register. */
static bool timed(unsigned type)
{
	switch (type) {
	case MT_REC_PROCESS:
	case MT_REC_MODULE:
	case MT_REC_MODULE_GONE:
	case MT_REC_ALLOC:
	case MT_REC_FREE:
	case MT_REC_REALLOC:
	case MT_REC_FAIL:
	case MT_REC_MMAP:
	case MT_REC_MUNMAP:
	case MT_REC_MREMAP:
	case MT_REC_SAMPLE:
	case MT_REC_EXIT:
	case MT_REC_MARK:
	case MT_REC_EXEC:
		return true;
	default:
		return false;
	}
}

static bool host(uint64_t fn, struct cur *c)
{
	uint64_t kind = c->p < c->end ? u(c) : mt_fn_kind((unsigned)fn);
	return kind == MT_KIND_HOST;
}

/*
 * One chunk's records into the table, those up to cutoff; false when the
 * table cannot grow. A record that does not decode ends the chunk, as it
 * would for the analyzer.
 */
static bool chunk_events(struct table *t, const uint8_t *p, const uint8_t *end, uint64_t time,
                         uint64_t cutoff)
{
	uint64_t addr = 0;

	t->last_alloc = false; /* another thread's, or another stretch of this one's */
	while (p < end && *p) {
		unsigned type = *p++;
		if (mt_record_is_short(type)) {
			bool alive = type != MT_REC_SHORT_FREE;
			uint64_t size = 0;
			if (end - p >= SHORT_MAX) {
				/* the chunk's data bounds no field here: no check a byte */
				time += (uint64_t)mt_unzigzag(fast_u(&p));
				addr += (uint64_t)mt_unzigzag(fast_u(&p));
				if (alive)
					size = fast_u(&p);
				if (type == MT_REC_SHORT_MALLOC)
					fast_u(&p); /* stack */
				if (alive && end - p >= SHORT_MAX && *p == MT_REC_SHORT_FREE) {
					/*
					 * freed by the next record (a temporary: most of a busy
					 * program's blocks): what event() does with the two, the
					 * allocation queued and taken back out, without either
					 * (the free's address step is a single 0 byte). Not when
					 * the free comes after the cutoff: a fork child's scan
					 * finds the block live (test-reach fork-temporary).
					 */
					const uint8_t *q = p + 1;
					uint64_t freed = time + (uint64_t)mt_unzigzag(fast_u(&q));
					if (*q == 0 && addr && time <= cutoff && freed <= cutoff) {
						time = freed;
						p = q + 1;
						t->last_alloc = false;
						continue;
					}
				}
			} else {
				struct cur c = {p, end, false};
				time += z(&c);
				addr += z(&c);
				size = alive ? u(&c) : 0;
				if (type == MT_REC_SHORT_MALLOC)
					u(&c);
				if (c.bad)
					return true;
				p = c.p;
			}
			if (time <= cutoff && !event(t, addr, time, alive, size))
				return false;
			continue;
		}
		struct cur c = {p, end, false};
		uint64_t len = u(&c);
		if (c.bad || len > (uint64_t)(end - c.p))
			return true;
		c.end = c.p + len;
		p = c.end;
		if (!timed(type))
			continue;
		time += z(&c);
		switch (type) {
		case MT_REC_ALLOC: {
			uint64_t fn = u(&c);
			addr += z(&c);
			uint64_t size = u(&c);
			u(&c); /* stack */
			if (!c.bad && host(fn, &c) && !c.bad && time <= cutoff &&
			    !event(t, addr, time, true, size))
				return false;
			break;
		}
		case MT_REC_FREE: {
			uint64_t fn = u(&c);
			addr += z(&c);
			if (!c.bad && host(fn, &c) && !c.bad && time <= cutoff &&
			    !event(t, addr, time, false, 0))
				return false;
			break;
		}
		case MT_REC_REALLOC: {
			uint64_t t0 = time - u(&c);
			u(&c); /* fn */
			uint64_t old = addr += z(&c);
			uint64_t new = addr += z(&c);
			uint64_t size = u(&c);
			if (c.bad)
				break;
			if (old && t0 <= cutoff && !event(t, old, t0, false, 0))
				return false;
			if (new &&time <= cutoff && !event(t, new, time, true, size))
				return false;
			break;
		}
		case MT_REC_MMAP:
			u(&c);
			addr += z(&c);
			break;
		case MT_REC_MUNMAP:
			addr += z(&c);
			break;
		case MT_REC_MREMAP:
			u(&c);
			addr += z(&c);
			u(&c);
			addr += z(&c);
			break;
		default:
			break;
		}
	}
	return true;
}

typedef bool (*chunk_fn)(void *ctx, const struct mt_chunk_header *h, const uint8_t *data,
                         const uint8_t *end);

/* The chunk at off, if one was written there; its end in *end. */
static const struct mt_chunk_header *chunk_at(const uint8_t *file, uint64_t size, uint64_t off,
                                              uint64_t *end)
{
	const struct mt_chunk_header *h = (const void *)(file + off);

	if (off < MT_CHUNK_UNIT || off % MT_CHUNK_UNIT ||
	    off + sizeof(struct mt_chunk_header) > size || h->magic != MT_CHUNK_MAGIC ||
	    h->size < MT_CHUNK_UNIT || h->size % MT_CHUNK_UNIT)
		return NULL;
	*end = off + h->size < size ? off + h->size : size;
	return h;
}

/*
 * The chunks the process listed (reach.c: its own and its fork ancestors'),
 * those of the list from from to to, or, when it kept no list, every chunk
 * of the file in file order, as the analyzer walks them. *visited: how
 * many.
 */
/*
 * The pages of a chunk read through leave the copy's RSS at once (they stay
 * in the page cache): mapped to the end, a trace of 11 GB took the copy of
 * an exiting bench-small to 10.9 GB of RSS, which a job's accounting of its
 * peak counts. From LET_GO_BACK before the chunk: a fault maps the pages
 * around it that the page cache holds, those of the chunk before too, which
 * was let go already (39 MB left of a 222 MB trace without it).
 */
#define LET_GO_BACK (2ull << 20)
static void let_go(const uint8_t *file, uint64_t off, uint64_t end)
{
	uint64_t from = off > LET_GO_BACK ? off - LET_GO_BACK : 0;

	syscall(SYS_madvise, file + from, end - from, MADV_DONTNEED);
}

static bool each_chunk(const struct mt_reach_input *in, const uint8_t *file, uint64_t size,
                       uint64_t from, uint64_t to, chunk_fn fn, void *ctx, uint64_t *visited)
{
	const struct mt_file_header *fh = (const void *)file;
	uint64_t off = fh->header_size, end;

	*visited = 0;
	if (in->chunks) {
		for (uint64_t i = from; i < to; i++) {
			const uint64_t *blk = in->chunks[i >> MT_REACH_CHUNK_BLOCK_BITS];
			const struct mt_chunk_header *h;
			off = blk ? blk[i & ((1u << MT_REACH_CHUNK_BLOCK_BITS) - 1)] : 0;
			if (!off || !(h = chunk_at(file, size, off, &end)))
				continue; /* being listed this moment, or never written */
			++*visited;
			if (!fn(ctx, h, file + off + sizeof(*h), file + end))
				return false;
			let_go(file, off, end);
		}
		return true;
	}
	while (off + sizeof(struct mt_chunk_header) <= size) {
		const struct mt_chunk_header *h = (const void *)(file + off);
		if (h->magic != MT_CHUNK_MAGIC) {
			off += MT_CHUNK_UNIT; /* claimed and never written */
			continue;
		}
		if (h->size < MT_CHUNK_UNIT || h->size % MT_CHUNK_UNIT)
			break;
		end = off + h->size < size ? off + h->size : size;
		++*visited;
		if (!fn(ctx, h, file + off + sizeof(*h), file + end))
			return false;
		let_go(file, off, end);
		off += h->size;
	}
	return true;
}

struct walk {
	struct instance *ins;
	uint64_t nins;
	uint64_t bytes; /* of the chunks read */
	struct table t;
};

/* The PROCESS record first in an instance's first chunk: its start and parent. */
static bool process_of(void *ctx, const struct mt_chunk_header *h, const uint8_t *p,
                       const uint8_t *end)
{
	struct walk *w = ctx;
	struct instance *in;
	struct cur c = {p + 1, end, false};

	w->bytes += h->size;
	if (h->instance >= w->nins || p >= end || *p != MT_REC_PROCESS)
		return true;
	in = &w->ins[h->instance];
	u(&c); /* length */
	uint64_t start = h->base_ticks + z(&c);
	u(&c); /* pid */
	u(&c); /* ppid */
	uint64_t origin = u(&c);
	uint64_t parent = u(&c);
	if (c.bad || in->seen)
		return true;
	in->seen = true;
	in->start = start;
	in->origin = (uint8_t)origin;
	in->parent = parent < w->nins ? (uint32_t)parent : 0;
	return true;
}

static bool events_of(void *ctx, const struct mt_chunk_header *h, const uint8_t *p,
                      const uint8_t *end)
{
	struct walk *w = ctx;

	if (h->instance >= w->nins || !w->ins[h->instance].cutoff)
		return true;
	return chunk_events(&w->t, p, end, h->base_ticks, w->ins[h->instance].cutoff);
}

/* ---- blocks and slots in address order ---- */

/*
 * Sorts n elements of size bytes, each led by its address, by address:
 * radix, 11 bits at a time (2048 buckets stay in the cache while they are
 * scattered to), through tmp; a digit every address shares (the high bits
 * of a heap) costs no pass. Inlined for each size, so that an element's
 * copy is a few moves.
 */
#define DIGIT 11
static inline __attribute__((always_inline)) void sort_by_addr(void *base, void *tmp, size_t n,
                                                               size_t size)
{
	size_t count[1u << DIGIT];
	uint64_t all_or = 0, all_and = ~0ull;
	char *b = base, *t = tmp;

#define ADDR(p, i) (*(const uint64_t *)((p) + (i)*size))
	for (size_t i = 0; i < n; i++) {
		all_or |= ADDR(b, i);
		all_and &= ADDR(b, i);
	}
	for (unsigned shift = 0; shift < 64; shift += DIGIT) {
		uint64_t mask = (1u << DIGIT) - 1;
		if (!((all_or ^ all_and) >> shift & mask))
			continue;
		memset(count, 0, sizeof(count));
		for (size_t i = 0; i < n; i++)
			count[ADDR(b, i) >> shift & mask]++;
		size_t sum = 0;
		for (size_t d = 0; d <= mask; d++) {
			size_t c = count[d];
			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			memcpy(t + count[ADDR(b, i) >> shift & mask]++ * size, b + i * size, size);
		memcpy(b, t, n * size);
	}
#undef ADDR
}

/*
 * The table's slots, the dead ones too (the other half's blocks may have
 * been freed here), moved to its front and sorted by address through the
 * room behind them (a table is at most half full).
 */
static size_t sort_table(struct table *t)
{
	size_t n = 0;

	for (size_t i = 0; i < t->cap; i++)
		if (t->s[i].addr)
			t->s[n++] = t->s[i];
	if (n)
		sort_by_addr(t->s, t->s + n, n, sizeof(*t->s));
	return n;
}

/*
 * The live blocks of two address-sorted slot lists, b's events read after
 * a's, in address order: into out unless NULL; how many. An address in
 * both takes b's slot as apply would take an event: unless it is older,
 * or a free at the tick of a's allocation.
 */
static size_t live_of(const struct slot *a, size_t na, const struct slot *b, size_t nb,
                      struct mt_reach_block *out)
{
	size_t i = 0, j = 0, n = 0;

	while (i < na || j < nb) {
		const struct slot *s;
		if (j == nb || (i < na && a[i].addr < b[j].addr)) {
			s = &a[i++];
		} else if (i == na || b[j].addr < a[i].addr) {
			s = &b[j++];
		} else {
			s = b[j].time < a[i].time ||
			                    (b[j].time == a[i].time && !(b[j].size & ALIVE))
			            ? &a[i]
			            : &b[j];
			i++;
			j++;
		}
		if (!(s->size & ALIVE))
			continue;
		if (out)
			out[n] = (struct mt_reach_block){s->addr, s->size & ~ALIVE};
		n++;
	}
	return n;
}

/* ---- the events on two cores ---- */

/*
 * The chunk list's second half is read by a second process of the copy's
 * (reach.c's mt_reach_fork) into its own table while the copy reads the
 * first half into its own; each sorts its table's slots by address, and
 * the copy merges the two lists. An address's state is its latest event by
 * time (at one time an allocation's over a free's, and the later of two
 * allocations read, as the second half's are), a rule that the order
 * events meet it does not change: the result is the one process's. Each
 * chunk's records are read whole by one of them, so that a temporary's
 * allocation and free (one chunk's) still cancel, and every instance's
 * cutoff, found before the split, holds in both.
 *
 * Worth it from SPLIT_MIN bytes of chunks, and from 1/SPLIT_RSS of the
 * copy's resident bytes: the second process costs a clone of the copy (the
 * page tables of the program's memory: 26 ms a GB, where a MB of chunks
 * takes about 6 ms to read).
 */
#define SPLIT_MIN (4ull << 20)
#define SPLIT_RSS 64

/* What the second process hands back: this, then its slots in address order. */
struct half {
	uint64_t n;       /* slots */
	uint64_t visited; /* chunks read */
};
#define HALF_HEADER 64u

/*
 * The list index before which half the listed chunks' bytes lie. Each
 * header's pages are let go as a chunk's are (a fault maps the pages around
 * it: kept, they were 15 MB of the copy's RSS on a 220 MB trace).
 */
static uint64_t middle(const struct mt_reach_input *in, const uint8_t *file, uint64_t size,
                       uint64_t bytes)
{
	uint64_t sum = 0, end;

	for (uint64_t i = 0; i < in->nchunks; i++) {
		const uint64_t *blk = in->chunks[i >> MT_REACH_CHUNK_BLOCK_BITS];
		uint64_t off = blk ? blk[i & ((1u << MT_REACH_CHUNK_BLOCK_BITS) - 1)] : 0;
		const struct mt_chunk_header *h = off ? chunk_at(file, size, off, &end) : NULL;
		if (!h)
			continue;
		sum += h->size;
		let_go(file, off, end);
		if (sum >= bytes / 2)
			return i + 1;
	}
	return in->nchunks;
}

/* The second process: the list's chunks from from on, its sorted slots into out (room bytes). */
static _Noreturn void second_half(const struct mt_reach_input *in, struct walk *w,
                                  const uint8_t *file, uint64_t size, uint64_t from,
                                  struct half *out, uint64_t room)
{
	uint64_t visited, n, bytes;

	if (!each_chunk(in, file, size, from, in->nchunks, events_of, w, &visited) || !flush(&w->t))
		syscall(SYS_exit_group, 1);
	n = sort_table(&w->t);
	bytes = HALF_HEADER + n * sizeof(struct slot);
	if (bytes > room || mt_reach_mapped + bytes > mt_reach_budget)
		syscall(SYS_exit_group, 1);
	if (n)
		memcpy((char *)out + HALF_HEADER, w->t.s, n * sizeof(struct slot));
	out->n = n;
	out->visited = visited;
	mt_reach_hand();
}

/*
 * The listed chunks' live blocks, read on two cores, in address order into
 * *blocks (n of them, *visited the chunks read): the first half's events
 * into w->t, the second's handed back sorted, the two lists merged. False
 * when that could not be done, all of it let go (the copy then reads every
 * chunk alone), and when the program takes in orphans (in->one_core).
 * While both run, each may map half of what the budget leaves, the second
 * process's slots included.
 */
static bool in_two(const struct mt_reach_input *in, struct walk *w, const uint8_t *file,
                   uint64_t size, uint64_t *visited, struct mt_reach_block **blocks, size_t *n)
{
	uint64_t budget = mt_reach_budget, base = mt_reach_mapped, room, touched, mine, from;
	const struct slot *theirs;
	struct half *h;
	long pid;
	bool ok;

	if (in->one_core || !in->chunks || w->bytes < SPLIT_MIN ||
	    w->bytes < mt_reach_rss() / SPLIT_RSS || base >= budget || mt_reach_cpus() < 2)
		return false;
	room = (budget - base) / 2;
	h = mt_reach_map_shared(room);
	if (!h)
		return false;
	from = middle(in, file, size, w->bytes);
	mt_reach_budget = base + room;
	pid = mt_reach_fork();
	if (pid == 0)
		second_half(in, w, file, size, from, h, room);
	ok = pid > 0 && each_chunk(in, file, size, 0, from, events_of, w, &mine) && flush(&w->t);
	if (pid > 0 && !ok)
		mt_reach_reap(true);
	ok = ok && mt_reach_handed();
	mt_reach_budget = budget;
	if (ok) {
		theirs = (const struct slot *)((const char *)h + HALF_HEADER);
		touched = (HALF_HEADER + h->n * sizeof(*theirs) + 4095) & ~4095ull;
		mt_reach_mapped += touched;
		size_t nmine = sort_table(&w->t);
		*n = live_of(w->t.s, nmine, theirs, h->n, NULL);
		*blocks = mt_reach_map((*n + 1) * sizeof(**blocks));
		if (*blocks)
			live_of(w->t.s, nmine, theirs, h->n, *blocks);
		mt_reach_mapped -= touched;
		*visited = mine + h->visited;
		ok = *blocks != NULL;
	}
	mt_reach_unmap_shared(h, room);
	if (w->t.s)
		mt_reach_unmap(w->t.s, w->t.cap * sizeof(*w->t.s));
	w->t = (struct table){0};
	return ok;
}

int mt_reach_live(const struct mt_reach_input *in, struct mt_reach_block **blocks, size_t *n,
                  uint64_t *chunks, uint64_t *detail)
{
	struct stat st;
	const uint8_t *file;
	const struct mt_file_header *fh;
	struct walk w = {0};
	struct mt_reach_block *b, *tmp;
	size_t nb = 0;
	uint32_t cur;

	if (syscall(SYS_fstat, in->trace_fd, &st) < 0) {
		*detail = (uint64_t)errno;
		return MT_REACH_NO_TRACE;
	}
	file = (const uint8_t *)syscall(SYS_mmap, NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED,
	                                in->trace_fd, 0);
	if (file == MAP_FAILED) {
		*detail = (uint64_t)errno;
		return MT_REACH_NO_TRACE;
	}
	fh = (const void *)file;
	if ((uint64_t)st.st_size < MT_CHUNK_UNIT || memcmp(fh->magic, MT_FILE_MAGIC, 8) ||
	    fh->header_size != MT_CHUNK_UNIT) {
		*detail = EBADMSG;
		return MT_REACH_NO_TRACE;
	}
	w.nins = fh->next_instance + 1;
	w.ins = mt_reach_map(w.nins * sizeof(*w.ins));
	if (!w.ins)
		goto no_memory;
	each_chunk(in, file, (uint64_t)st.st_size, 0, in->nchunks, process_of, &w, chunks);
	/* the instance, then each one it was forked from, up to that fork */
	if (in->instance >= w.nins) {
		*detail = EBADMSG;
		return MT_REACH_NO_TRACE;
	}
	w.ins[in->instance].cutoff = in->cutoff;
	for (cur = in->instance; w.ins[cur].seen && w.ins[cur].origin == MT_ORIGIN_FORK;) {
		uint32_t parent = w.ins[cur].parent;
		if (!parent || w.ins[parent].cutoff)
			break;
		w.ins[parent].cutoff = w.ins[cur].start;
		cur = parent;
	}
	if (in_two(in, &w, file, (uint64_t)st.st_size, chunks, blocks, n))
		return 0;
	if (!each_chunk(in, file, (uint64_t)st.st_size, 0, in->nchunks, events_of, &w, chunks) ||
	    !flush(&w.t))
		goto no_memory;
	for (size_t i = 0; i < w.t.cap; i++)
		nb += (w.t.s[i].size & ALIVE) != 0;
	b = mt_reach_map((nb + 1) * sizeof(*b));
	tmp = mt_reach_map((nb + 1) * sizeof(*tmp));
	if (!b || !tmp)
		goto no_memory;
	nb = 0;
	for (size_t i = 0; i < w.t.cap; i++)
		if (w.t.s[i].size & ALIVE)
			b[nb++] = (struct mt_reach_block){w.t.s[i].addr, w.t.s[i].size & ~ALIVE};
	sort_by_addr(b, tmp, nb, sizeof(*b));
	mt_reach_unmap(tmp, (nb + 1) * sizeof(*tmp));
	mt_reach_unmap(w.t.s, w.t.cap * sizeof(*w.t.s));
	*blocks = b;
	*n = nb;
	return 0;
no_memory:
	*detail = mt_reach_mapped;
	return MT_REACH_NO_MEMORY;
}
