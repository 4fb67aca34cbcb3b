/* SPDX-License-Identifier: MIT */
/*
 * The copy's scan: roots, then blocks, classified as valgrind's memcheck
 * does (docs/reachability.md).
 *
 * Roots are every readable and writable mapping except malloc's heap (the
 * blocks are scanned as blocks; the rest of the heap is free chunks, whose
 * stale contents must not hold anything), the trace's and memtrace's own
 * mappings, and the part of the exiting thread's stack below its stack
 * pointer (dead frames; its registers were saved above it). The heap is
 * glibc's: the [heap] mapping, each arena heap (64 MiB-aligned, its size in
 * its heap_info) and each mmapped chunk (its size in its header), found from
 * the live blocks. Other threads' stacks are scanned whole: their stack
 * pointers are not known here, so a dead frame of theirs can keep a block
 * "reachable", never the reverse.
 *
 * The classes: from the roots, a pointer to a block's start makes it
 * reachable, one into its middle possible, and a block is scanned when it
 * is first reached, again when it becomes reachable (what a possible block
 * points to is possible). Then each block still unreached, in address
 * order, leads a clique: the unreached blocks it reaches are indirect, it
 * stays definite.
 *
 * Context: the copy (reach.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "memtrace/trace-format.h"
#include "reach.h"

#define HEAP_MAX   (64ull << 20) /* glibc's HEAP_MAX_SIZE on 64-bit */
#define IS_MMAPPED 2ull
#define MAX_RANGES 65536

enum { UNREACHED, POSSIBLE, REACHABLE, INDIRECT };

#define range mt_reach_range

static sigjmp_buf fault_jump;
static volatile uintptr_t fault_addr;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	fault_addr = (uintptr_t)si->si_addr;
	siglongjmp(fault_jump, 1);
}

bool mt_reach_peek(uintptr_t addr, uint64_t *v)
{
	if (sigsetjmp(fault_jump, 0))
		return false;
	*v = *(const volatile uint64_t *)addr;
	return true;
}

/*
 * Finding the block a word points into, for every word of the roots and the
 * blocks, is most of the scan. Small blocks are found through an index of
 * the 256-byte granules they touch (each granule: the first block touching
 * it, and a granule holds a few blocks at most); the few large ones by
 * binary search.
 */
#define GRANULE_BITS 8
#define BATCH        32
#define SMALL_MAX    4096u

struct granule {
	uint64_t key; /* granule number + 1; 0: empty */
	uint32_t first;
};

struct scan {
	const struct mt_reach_block *b;
	size_t n;
	uint64_t lo, hi; /* the blocks' span */
	struct granule *g;
	size_t gcap;
	uint32_t *big; /* the large blocks' indices, in address order */
	size_t nbig;
	uint8_t *state;
	/* blocks to scan, first in first out: a block's first line is fetched
	 * LOOKAHEAD blocks before its turn */
	uint32_t *queue;
	size_t head, tail;
	/* words to look up (resolve), the leader of the clique being marked or -1 */
	uint64_t pend[BATCH];
	bool pdef[BATCH];
	volatile unsigned npend;
	long leader;
	uint64_t scanned;
};

#define LOOKAHEAD 8
static void queue(struct scan *s, long i)
{
	s->queue[s->tail++] = (uint32_t)i;
}

static size_t granule_slot(uint64_t key, size_t cap)
{
	/* neighbours stay neighbours (see reach-live.c's slot_of) */
	return (key + (key >> 20) * 0x9e3779b97f4a7c15u) & (cap - 1);
}

static bool index_blocks(struct scan *s)
{
	size_t want = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (s->b[i].size > SMALL_MAX)
			s->nbig++;
		else
			want += (s->b[i].size >> GRANULE_BITS) + 2;
	}
	for (s->gcap = 1024; s->gcap < 2 * want;)
		s->gcap *= 2;
	s->g = mt_reach_map(s->gcap * sizeof(*s->g));
	s->big = mt_reach_map((s->nbig + 1) * sizeof(*s->big));
	if (!s->g || !s->big)
		return false;
	s->nbig = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct mt_reach_block *b = &s->b[i];
		if (b->size > SMALL_MAX) {
			s->big[s->nbig++] = (uint32_t)i;
			continue;
		}
		uint64_t last = (b->addr + (b->size ? b->size - 1 : 0)) >> GRANULE_BITS;
		for (uint64_t k = b->addr >> GRANULE_BITS; k <= last; k++) {
			size_t j = granule_slot(k + 1, s->gcap);
			while (s->g[j].key && s->g[j].key != k + 1)
				j = (j + 1) & (s->gcap - 1);
			if (!s->g[j].key) /* blocks come in address order: the first one stays */
				s->g[j] = (struct granule){k + 1, (uint32_t)i};
		}
	}
	return true;
}

static bool holds(const struct mt_reach_block *b, uint64_t v)
{
	return v >= b->addr && (v < b->addr + b->size || v == b->addr);
}

/* The slot of v's granule, or NULL: the first stage of a look-up. */
static const struct granule *granule_of(const struct scan *s, uint64_t v)
{
	uint64_t key = (v >> GRANULE_BITS) + 1;
	size_t j = granule_slot(key, s->gcap);

	while (s->g[j].key && s->g[j].key != key)
		j = (j + 1) & (s->gcap - 1);
	return s->g[j].key ? &s->g[j] : NULL;
}

/* The block holding v (its start, or inside it), or -1, from v's granule. */
static long find(const struct scan *s, uint64_t v, const struct granule *g)
{
	size_t lo = 0, hi = s->nbig;

	if (g)
		for (size_t i = g->first; i < s->n && s->b[i].addr <= v; i++)
			if (holds(&s->b[i], v))
				return (long)i;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->b[s->big[mid]].addr <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && holds(&s->b[s->big[lo - 1]], v) ? (long)s->big[lo - 1] : -1;
}

/* What a word found while marking from the roots does to the block i it points to. */
static void from_roots(struct scan *s, uint64_t v, long i, bool prior_definite)
{
	if (i < 0 || s->state[i] == REACHABLE)
		return;
	if (v == s->b[i].addr && prior_definite) {
		s->state[i] = REACHABLE;
		queue(s, i);
	} else if (s->state[i] == UNREACHED) {
		s->state[i] = POSSIBLE;
		queue(s, i);
	}
}

/* The same in a clique led by block leader. */
static void from_leader(struct scan *s, long i, long leader)
{
	if (i < 0 || i == leader || s->state[i] != UNREACHED)
		return;
	s->state[i] = INDIRECT;
	queue(s, i);
}

/*
 * The words of [p, hi) that may point into a block, looked up BATCH at a
 * time: each one's index slot is fetched while the next words are read.
 * The batch is emptied at every page's end, so that a page that faults
 * (scan_words) loses no word read before it.
 */
/*
 * A batch of words, each looked up in stages, every stage's memory fetched
 * for the whole batch before the next stage reads it: the granule slots
 * (fetched by words()), then the blocks' entries, then their states. The
 * batch spans blocks, so that a block of a few pointers adds them to a
 * batch rather than being one.
 */
static void resolve(struct scan *s)
{
	const struct granule *g[BATCH];
	long at[BATCH];
	unsigned n = s->npend;

	for (unsigned k = 0; k < n; k++) {
		g[k] = granule_of(s, s->pend[k]);
		if (g[k])
			__builtin_prefetch(&s->b[g[k]->first]);
	}
	for (unsigned k = 0; k < n; k++) {
		at[k] = find(s, s->pend[k], g[k]);
		if (at[k] >= 0)
			__builtin_prefetch(&s->state[at[k]]);
	}
	s->npend = 0;
	for (unsigned k = 0; k < n; k++)
		if (s->leader < 0)
			from_roots(s, s->pend[k], at[k], s->pdef[k]);
		else
			from_leader(s, at[k], s->leader);
}

/* The words of [p, hi) that may point into a block, into the batch. */
static void words(struct scan *s, uintptr_t p, uintptr_t hi, bool prior_definite)
{
	for (; p < hi; p += 8) {
		uint64_t w = *(const uint64_t *)p;
		if (w < s->lo || w >= s->hi)
			continue;
		__builtin_prefetch(&s->g[granule_slot((w >> GRANULE_BITS) + 1, s->gcap)]);
		/* in memory, not in registers: a fault's jump (scan_words) keeps them */
		unsigned n = s->npend;
		s->pend[n] = w;
		s->pdef[n] = prior_definite;
		s->npend = n + 1;
		if (n + 1 == BATCH)
			resolve(s);
	}
}

/* Every aligned word of [lo, hi); a page that faults is stepped over. */
static void scan_words(struct scan *s, uintptr_t lo, uintptr_t hi, bool prior_definite)
{
	volatile uintptr_t start = (lo + 7) & ~(uintptr_t)7;

	hi &= ~(uintptr_t)7;
	if (sigsetjmp(fault_jump, 0)) {
		uintptr_t next = (fault_addr | 4095) + 1;
		if (next <= start)
			return;
		start = next;
	}
	words(s, start, hi, prior_definite);
	s->scanned += hi > lo ? hi - lo : 0;
}

/* Scans the queued blocks and what they reach, until nothing is left to look up. */
static void drain(struct scan *s)
{
	for (;;) {
		while (s->head < s->tail) {
			uint32_t i = s->queue[s->head++];
			if (s->head + LOOKAHEAD < s->tail)
				__builtin_prefetch(
				        (const void *)s->b[s->queue[s->head + LOOKAHEAD]].addr);
			bool definite = s->state[i] != POSSIBLE;
			scan_words(s, s->b[i].addr, s->b[i].addr + s->b[i].size, definite);
		}
		if (!s->npend)
			break;
		resolve(s);
	}
	s->head = s->tail = 0;
}

struct ranges {
	struct range *r;
	size_t n;
};

static void add(struct ranges *x, uintptr_t lo, uintptr_t hi)
{
	if (lo < hi && x->n < MAX_RANGES)
		x->r[x->n++] = (struct range){lo, hi};
}

static void sort_ranges(struct ranges *x)
{
	/* insertion sort: the heap's ranges come nearly sorted, from sorted blocks */
	for (size_t i = 1; i < x->n; i++) {
		struct range v = x->r[i];
		size_t j = i;
		while (j && x->r[j - 1].lo > v.lo) {
			x->r[j] = x->r[j - 1];
			j--;
		}
		x->r[j] = v;
	}
}

/*
 * glibc's heap around the live blocks outside [heap]: each arena heap and
 * mmapped chunk, read from its headers. A header that does not make sense
 * (another allocator under ours) adds nothing: that memory is then a root,
 * which can only make a block reachable.
 */
static void heap_ranges(struct ranges *x, const struct mt_reach_block *b, size_t n,
                        struct range brk_heap)
{
	uintptr_t last_hi = 0;

	for (size_t i = 0; i < n; i++) {
		uintptr_t a = b[i].addr;
		uint64_t hdr, prev, size;
		if ((a >= brk_heap.lo && a < brk_heap.hi) || a < last_hi)
			continue;
		if (!mt_reach_peek(a - 8, &hdr))
			continue;
		if (hdr & IS_MMAPPED) {
			if (!mt_reach_peek(a - 16, &prev) || prev > a - 16)
				continue;
			uintptr_t lo = a - 16 - prev, hi = lo + (hdr & ~7ull);
			if (hi < a + b[i].size)
				continue;
			add(x, lo, hi);
			last_hi = hi;
		} else {
			uintptr_t base = a & ~(uintptr_t)(HEAP_MAX - 1);
			if (!mt_reach_peek(base + 16, &size) || size > HEAP_MAX || a >= base + size)
				continue;
			add(x, base, base + size);
			last_hi = base + size;
		}
	}
}

/*
 * glibc's main arena, in libc's data: its bins point at free chunks and its
 * top at the top chunk, each header inside the last 8 bytes of the block
 * before it, which would read as an interior pointer to that block and make
 * a lost block possible. It is found by its top field, the one word of
 * libc's data that points at a chunk of [heap] ending at the program break;
 * the struct (glibc 2.26 and later, 64-bit) is 2200 bytes, top at 96.
 */
#define ARENA_TOP  96u
#define ARENA_SIZE 2200u
static void main_arena(struct ranges *x, const struct mt_reach_input *in, struct range heap)
{
	uint64_t w, size;

	if (!in->libc_lo || heap.lo >= heap.hi || in->brk <= heap.lo || in->brk > heap.hi)
		return;
	for (uintptr_t a = (in->libc_lo + 7) & ~(uintptr_t)7; a + 8 <= in->libc_hi; a += 8) {
		if (!mt_reach_peek(a, &w) || w < heap.lo || w >= in->brk || w & 15)
			continue;
		if (mt_reach_peek(w + 8, &size) && w + (size & ~7ull) == in->brk &&
		    a >= ARENA_TOP) {
			add(x, a - ARENA_TOP, a - ARENA_TOP + ARENA_SIZE);
			return;
		}
	}
}

static uintptr_t hex(const char **p)
{
	uintptr_t v = 0;

	for (;; (*p)++) {
		char c = **p;
		if (c >= '0' && c <= '9')
			v = v << 4 | (uintptr_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uintptr_t)(c - 'a' + 10);
		else
			return v;
	}
}

struct vma {
	uintptr_t lo, hi;
	bool rw, heap, skip;
};

/* One line of /proc/self/maps: "lo-hi perms offset dev inode  path". */
static const char *parse_vma(const char *p, const char *end, const struct mt_reach_input *in,
                             struct vma *v)
{
	uint64_t ino = 0;

	v->lo = hex(&p);
	p++;
	v->hi = hex(&p);
	p++;
	v->rw = p + 2 < end && p[0] == 'r' && p[1] == 'w';
	for (int field = 0; field < 3 && p < end; field++) { /* perms, offset, dev */
		while (p < end && *p != ' ')
			p++;
		while (p < end && *p == ' ')
			p++;
	}
	while (p < end && *p >= '0' && *p <= '9')
		ino = ino * 10 + (uint64_t)(*p++ - '0');
	while (p < end && *p == ' ')
		p++;
	v->heap = end - p >= 6 && !memcmp(p, "[heap]", 6);
	v->skip = (ino && ino == (uint64_t)in->trace_ino) || (end - p >= 2 && !memcmp(p, "[v", 2));
	while (p < end && *p != '\n')
		p++;
	return p < end ? p + 1 : end;
}

/* /proc/self/maps whole, into a mapping of the copy's own. */
static char *read_maps(size_t *len, size_t *cap)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
	char *buf;

	*cap = 1 << 20;
	*len = 0;
	if (fd < 0)
		return NULL;
	buf = mt_reach_map(*cap);
	while (buf) {
		if (*len == *cap) {
			buf = mt_reach_remap(buf, *cap, *cap * 2);
			*cap *= 2;
			if (!buf)
				break;
		}
		long r = syscall(SYS_read, fd, buf + *len, *cap - *len);
		if (r <= 0)
			break;
		*len += (size_t)r;
	}
	syscall(SYS_close, fd);
	return buf;
}

/* [lo, hi) less the excluded ranges (sorted), each piece scanned as a root. */
static void scan_root(struct scan *s, uintptr_t lo, uintptr_t hi, const struct ranges *ex)
{
	for (size_t i = 0; i < ex->n && lo < hi; i++) {
		if (ex->r[i].hi <= lo || ex->r[i].lo >= hi)
			continue;
		if (ex->r[i].lo > lo)
			scan_words(s, lo, ex->r[i].lo, true);
		lo = ex->r[i].hi;
	}
	if (lo < hi)
		scan_words(s, lo, hi, true);
	drain(s);
}

int mt_reach_scan(const struct mt_reach_input *in, const struct mt_reach_block *blocks, size_t n,
                  uint8_t *cls, uint64_t *scanned, uint64_t *detail)
{
	struct scan s = {.b = blocks, .n = n, .leader = -1};
	struct ranges ex = {0};
	struct range brk_heap = {0, 0};
	size_t len, cap;
	char *maps;

	mt_reach_handle(SIGSEGV, on_fault);
	mt_reach_handle(SIGBUS, on_fault);
	maps = read_maps(&len, &cap);
	s.state = mt_reach_map(n + 1);
	s.queue = mt_reach_map((2 * n + 1) * sizeof(*s.queue));
	ex.r = mt_reach_map(MAX_RANGES * sizeof(*ex.r));
	if (!maps || !s.state || !s.queue || !ex.r || !index_blocks(&s)) {
		*detail = mt_reach_mapped;
		return MT_REACH_NO_MEMORY;
	}
	if (n) {
		s.lo = blocks[0].addr;
		for (size_t i = 0; i < n; i++)
			if (blocks[i].addr + blocks[i].size + 1 > s.hi)
				s.hi = blocks[i].addr + blocks[i].size + 1;
	}
	for (const char *p = maps, *end = maps + len; p < end;) {
		struct vma v;
		p = parse_vma(p, end, in, &v);
		if (v.heap)
			brk_heap = (struct range){v.lo, v.hi};
	}
	add(&ex, brk_heap.lo, brk_heap.hi);
	heap_ranges(&ex, blocks, n, brk_heap);
	main_arena(&ex, in, brk_heap);
	add(&ex, in->self_lo, in->self_hi);
	add(&ex, in->out_lo, in->out_hi);
	mt_reach_own_ranges(&ex.r[ex.n], MAX_RANGES - ex.n, &ex.n);
	mt_own_ranges(&ex.r[ex.n], MAX_RANGES - ex.n, &ex.n);
	sort_ranges(&ex);
	for (const char *p = maps, *end = maps + len; p < end;) {
		struct vma v;
		p = parse_vma(p, end, in, &v);
		if (!v.rw || v.skip)
			continue;
		/* the exiting thread: only its live frames, from its stack pointer up */
		if (in->sp >= v.lo && in->sp < v.hi)
			v.lo = in->sp;
		scan_root(&s, v.lo, v.hi, &ex);
	}
	/* the cliques of what nothing reached */
	for (size_t i = 0; i < n; i++) {
		if (s.state[i] != UNREACHED)
			continue;
		s.leader = (long)i;
		queue(&s, (long)i);
		drain(&s);
	}
	for (size_t i = 0; i < n; i++)
		cls[i] = s.state[i] == REACHABLE  ? MT_REACH_REACHABLE
		         : s.state[i] == POSSIBLE ? MT_REACH_POSSIBLE
		         : s.state[i] == INDIRECT ? MT_REACH_INDIRECT
		                                  : MT_REACH_DEFINITE;
	*scanned = s.scanned;
	return 0;
}
