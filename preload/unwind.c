/* SPDX-License-Identifier: MIT */
/*
 * The stack walker. On x86_64 it walks frames itself with a cache of unwind
 * rules, one 64-bit word per return address; libunwind does the walk when a
 * frame is anything but ordinary, and on other architectures.
 *
 * Why: libunwind's unw_backtrace costs about 7 ns a frame here, and a
 * memory profiler unwinds on every allocation. Almost every frame the
 * compilers emit follows one rule: CFA = rsp or rbp + constant, the return
 * address at CFA - 8, rbp either untouched or saved at a small offset below
 * the CFA. Those rules are read once per return address from .eh_frame
 * (found with libgcc's _Unwind_Find_FDE, the same lookup C++ exceptions
 * use), packed into the cache, and then a frame costs a hash lookup and two
 * loads. A frame whose rule does not fit (a DWARF expression, a signal
 * frame, a huge frame) sends the whole stack to libunwind, which knows them
 * all.
 *
 * Every load is checked against the thread's stack bounds, so a corrupt or
 * unusual stack ends the walk early instead of faulting.
 *
 * Context: hot path. May not: allocate (the rule cache is mmap'd: at start,
 * and when it grows), take a lock on a cache hit.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "mt.h"

#if defined(__x86_64__)

#include <emmintrin.h>

struct dwarf_eh_bases {
	void *tbase;
	void *dbase;
	void *func;
};
/* libgcc_s, exported since GCC 3.0; declared in no installed header. */
const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

/*
 * A cache word: bits 16-63 the return address, bit 0 CFA base (0 rsp, 1
 * rbp), bits 1-12 CFA offset / 8, bits 13-15 where rbp is saved (k: at CFA
 * - 8k; 0: not saved). CFA offset 0 marks the outermost frame (return
 * address undefined) and, with k 7, a frame only libunwind can step: both
 * are CFA = rsp, which fails walk's test of the CFA (it must be above sp),
 * so that the loop tests for neither. Offsets from 8 * OFF_LIMIT up are
 * libunwind's too. The rule in the low bits takes no mask of the address
 * off, and its base bit is tested with no 64-bit constant.
 */
#define IP_MASK        ((1ull << 48) - 1)
#define RULE(ip, rule) ((uint64_t)(ip) << 16 | (rule))
#define RULE_IP(r)     ((r) >> 16)
#define RULE_RBP       1u
#define OFF_FIELD(r)   ((r) >> 1 & 0xfff)
#define K_FIELD(r)     ((uint16_t)(r) >> 13)
#define OFF_LIMIT      0xfff
#define LIBUNWIND_ONLY (7u << 13)

/*
 * The cache is direct-mapped, 2^12 words (32 KiB) at first: a small program
 * meets a few hundred return addresses, and the program's RLIMIT_AS pays
 * for every word. Once it has computed as many rules as half its words, a
 * cache 4 times larger replaces it, up to 2^16 words (512 KiB), and fills
 * up again as frames are walked. A replaced cache is never unmapped (at most
 * 32 + 128 KiB): another thread's walk may be reading it, and walks take no
 * count of their users (two atomic operations per event). For the same
 * reason the cache is kept when tracing stops.
 */
#define RULE_BITS_FIRST 12
#define RULE_BITS_MAX   16
#define RULE_BITS_STEP  2
#define RULE_BITS_FIELD 4095        /* the cache is page-aligned */
static _Atomic uintptr_t rules;     /* the cache's address | log2 of its words; 0: none */
static _Atomic uint64_t rules_made; /* rules computed since it was mapped */
static _Atomic bool rules_grow_failed;
static uintptr_t libgcc_lo, libgcc_hi;

#define DW_RBP 6
#define DW_RSP 7
#define DW_RA  16

enum rule_kind { SAME = 0, AT_OFFSET, UNDEFINED, UNSUPPORTED };

struct regrule {
	uint8_t kind;
	int64_t off;
};

struct cfa_state {
	int cfa_reg;
	int64_t cfa_off;
	struct regrule rbp, ra;
};

static uint64_t uleb(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;

	mt_get_varint(p, end, &v);
	return v;
}

static int64_t sleb(const uint8_t **p, const uint8_t *end)
{
	int64_t v = 0;
	unsigned shift = 0;
	uint8_t b = 0x80;

	while (*p < end && (b & 0x80)) {
		b = *(*p)++;
		if (shift < 64)
			v |= (int64_t)(b & 0x7f) << shift;
		shift += 7;
	}
	if (shift < 64 && (b & 0x40))
		v |= -((int64_t)1 << shift);
	return v;
}

/* Bytes taken by an encoded pointer (DW_EH_PE_*); -1 if unknown. */
static int enc_size(uint8_t enc, const uint8_t **p, const uint8_t *end)
{
	if (enc == 0xff)
		return 0;
	switch (enc & 0x0f) {
	case 0x00:
		return 8;
	case 0x02:
	case 0x0a:
		return 2;
	case 0x03:
	case 0x0b:
		return 4;
	case 0x04:
	case 0x0c:
		return 8;
	case 0x01:
		uleb(p, end);
		return 0;
	case 0x09:
		sleb(p, end);
		return 0;
	default:
		return -1;
	}
}

static uint64_t read_udata(const uint8_t *p, uint8_t enc)
{
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (enc & 0x0f) {
	case 0x02:
	case 0x0a:
		__builtin_memcpy(&u16, p, 2);
		return u16;
	case 0x03:
	case 0x0b:
		__builtin_memcpy(&u32, p, 4);
		return u32;
	default:
		__builtin_memcpy(&u64, p, 8);
		return u64;
	}
}

static void set_rule(struct cfa_state *s, uint64_t reg, uint8_t kind, int64_t off)
{
	struct regrule r = {kind, off};

	if (reg == DW_RBP)
		s->rbp = r;
	else if (reg == DW_RA)
		s->ra = r;
}

/* Runs CFA instructions [p, end) up to address pc; loc is where they start. */
static int run_cfa(struct cfa_state *s, const struct cfa_state *initial, const uint8_t *p,
                   const uint8_t *end, uint64_t loc, uint64_t pc, uint64_t code_align,
                   int64_t data_align)
{
	struct cfa_state stack[8];
	int depth = 0;

	while (p < end) {
		uint8_t op = *p++;
		uint8_t hi = op & 0xc0, low = op & 0x3f;
		uint64_t reg, delta = 0;

		if (hi == 0x40) {
			delta = low * code_align;
		} else if (hi == 0x80) {
			set_rule(s, low, AT_OFFSET, (int64_t)uleb(&p, end) * data_align);
			continue;
		} else if (hi == 0xc0) {
			if (low == DW_RBP)
				s->rbp = initial->rbp;
			else if (low == DW_RA)
				s->ra = initial->ra;
			continue;
		} else {
			switch (op) {
			case 0x00:
				continue; /* nop */
			case 0x02:
				if (p + 1 > end)
					return -1;
				delta = p[0] * code_align;
				p += 1;
				break;
			case 0x03:
				if (p + 2 > end)
					return -1;
				delta = read_udata(p, 0x02) * code_align;
				p += 2;
				break;
			case 0x04:
				if (p + 4 > end)
					return -1;
				delta = read_udata(p, 0x03) * code_align;
				p += 4;
				break;
			case 0x05:
				reg = uleb(&p, end);
				set_rule(s, reg, AT_OFFSET, (int64_t)uleb(&p, end) * data_align);
				continue;
			case 0x11:
				reg = uleb(&p, end);
				set_rule(s, reg, AT_OFFSET, sleb(&p, end) * data_align);
				continue;
			case 0x2f:
				reg = uleb(&p, end);
				set_rule(s, reg, AT_OFFSET, -(int64_t)uleb(&p, end) * data_align);
				continue;
			case 0x06:
				reg = uleb(&p, end);
				if (reg == DW_RBP)
					s->rbp = initial->rbp;
				else if (reg == DW_RA)
					s->ra = initial->ra;
				continue;
			case 0x07:
				set_rule(s, uleb(&p, end), UNDEFINED, 0);
				continue;
			case 0x08:
				set_rule(s, uleb(&p, end), SAME, 0);
				continue;
			case 0x09:
				reg = uleb(&p, end);
				uleb(&p, end);
				set_rule(s, reg, UNSUPPORTED, 0);
				continue;
			case 0x0a:
				if (depth == 8)
					return -1;
				stack[depth++] = *s;
				continue;
			case 0x0b:
				if (!depth)
					return -1;
				*s = stack[--depth];
				continue;
			case 0x0c:
				s->cfa_reg = (int)uleb(&p, end);
				s->cfa_off = (int64_t)uleb(&p, end);
				continue;
			case 0x0d:
				s->cfa_reg = (int)uleb(&p, end);
				continue;
			case 0x0e:
				s->cfa_off = (int64_t)uleb(&p, end);
				continue;
			case 0x12:
				s->cfa_reg = (int)uleb(&p, end);
				s->cfa_off = sleb(&p, end) * data_align;
				continue;
			case 0x13:
				s->cfa_off = sleb(&p, end) * data_align;
				continue;
			case 0x0f:
				return -1; /* CFA by expression */
			case 0x10:
			case 0x16: /* expression / val_expression */
				reg = uleb(&p, end);
				p += uleb(&p, end);
				set_rule(s, reg, UNSUPPORTED, 0);
				continue;
			case 0x14:
				reg = uleb(&p, end);
				uleb(&p, end);
				set_rule(s, reg, UNSUPPORTED, 0);
				continue;
			case 0x15:
				reg = uleb(&p, end);
				sleb(&p, end);
				set_rule(s, reg, UNSUPPORTED, 0);
				continue;
			case 0x2e:
				uleb(&p, end);
				continue; /* GNU_args_size */
			case 0x01:
				return -1; /* set_loc: rare, not worth decoding */
			default:
				return -1;
			}
		}
		if (loc + delta > pc)
			return 0;
		loc += delta;
	}
	return 0;
}

/* Reads the rule at pc from .eh_frame and packs it; 0 if it does not fit. */
static uint64_t compute_rule(uint64_t ip)
{
	struct dwarf_eh_bases bases;
	const uint8_t *fde = _Unwind_Find_FDE((void *)(ip - 1), &bases);
	const uint8_t *cie, *p, *cie_end, *fde_end, *aug;
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc = 0, version;
	bool has_z = false;
	uint32_t len;
	int32_t cie_off;
	struct cfa_state init = {0}, s;
	int size;

	if (!fde)
		return 0;
	__builtin_memcpy(&len, fde, 4);
	if (len == 0xffffffffu || len == 0)
		return 0;
	fde_end = fde + 4 + len;
	__builtin_memcpy(&cie_off, fde + 4, 4);
	cie = fde + 4 - cie_off;
	__builtin_memcpy(&len, cie, 4);
	if (len == 0xffffffffu || len == 0)
		return 0;
	cie_end = cie + 4 + len;
	p = cie + 8;
	version = *p++;
	aug = p;
	while (p < cie_end && *p)
		p++;
	p++;
	if (aug[0] == 'e' && aug[1] == 'h')
		p += 8;
	code_align = uleb(&p, cie_end);
	data_align = sleb(&p, cie_end);
	if (version == 1)
		p++;
	else
		uleb(&p, cie_end);
	for (const uint8_t *a = aug; *a; a++) {
		if (*a == 'z') {
			has_z = true;
			uleb(&p, cie_end);
		} else if (*a == 'R') {
			fde_enc = *p++;
		} else if (*a == 'P') {
			uint8_t enc = *p++;
			size = enc_size(enc, &p, cie_end);
			if (size < 0)
				return 0;
			p += size;
		} else if (*a == 'L') {
			p++;
		} else if (*a == 'S') {
			return 0; /* a signal frame: libunwind knows the kernel's layout */
		} else if (*a != 'B' && *a != 'G') {
			return 0;
		}
	}
	init.rbp.kind = SAME;
	init.ra.kind = UNDEFINED;
	if (run_cfa(&init, &init, p, cie_end, 0, 0, code_align, data_align) < 0)
		return 0;
	/* the FDE: pc_begin, pc_range, augmentation, instructions */
	p = fde + 8;
	size = enc_size(fde_enc, &p, fde_end);
	if (size <= 0)
		return 0;
	p += size;
	p += size; /* pc_range has the same size, format only */
	if (has_z)
		p += uleb(&p, fde_end);
	s = init;
	if (run_cfa(&s, &init, p, fde_end, (uintptr_t)bases.func, ip - 1, code_align, data_align) <
	    0)
		return 0;

	if (s.ra.kind == UNDEFINED)
		return RULE(ip, 0); /* outermost: CFA offset 0 */
	if ((s.cfa_reg != DW_RSP && s.cfa_reg != DW_RBP) || s.cfa_off <= 0 || s.cfa_off % 8 ||
	    s.cfa_off >= (int64_t)(8 * OFF_LIMIT) || s.ra.kind != AT_OFFSET || s.ra.off != -8)
		return 0;
	uint64_t k = 0;
	if (s.rbp.kind == AT_OFFSET) {
		if (s.rbp.off >= 0 || s.rbp.off % 8 || s.rbp.off < -56)
			return 0;
		k = (uint64_t)(-s.rbp.off / 8);
	} else if (s.rbp.kind != SAME) {
		return 0;
	}
	return RULE(ip, k << 13 | (uint64_t)(s.cfa_off / 8) << 1 | (s.cfa_reg == DW_RBP));
}

/* The slot of ip in the cache whose word (address | log2 of its words) is cache. */
static inline _Atomic uint64_t *slot(uintptr_t cache, uint64_t ip)
{
	_Atomic uint64_t *words = (_Atomic uint64_t *)(cache & ~(uintptr_t)RULE_BITS_FIELD);

	return &words[(ip * 0x9e3779b97f4a7c15u) >> (64 - (cache & RULE_BITS_FIELD))];
}

static void *rules_map(unsigned bits)
{
	return mt_own_map(sizeof(uint64_t) << bits);
}

/* Slow path: a rule was computed; the cache grows when it has made enough. */
static void rule_made(void)
{
	uintptr_t cur = atomic_load_explicit(&rules, memory_order_relaxed);
	unsigned bits = cur & RULE_BITS_FIELD;
	void *p;

	if (atomic_fetch_add_explicit(&rules_made, 1, memory_order_relaxed) + 1 <
	            (1ull << bits) / 2 ||
	    bits >= RULE_BITS_MAX || atomic_load_explicit(&rules_grow_failed, memory_order_relaxed))
		return;
	p = rules_map(bits + RULE_BITS_STEP);
	if (p == MAP_FAILED) {
		atomic_store(&rules_grow_failed, true); /* the small cache still works */
		return;
	}
	if (atomic_compare_exchange_strong_explicit(&rules, &cur,
	                                            (uintptr_t)p | (bits + RULE_BITS_STEP),
	                                            memory_order_release, memory_order_relaxed))
		atomic_store_explicit(&rules_made, 0, memory_order_relaxed);
	else
		mt_own_unmap(p, sizeof(uint64_t) << (bits + RULE_BITS_STEP)); /* another's won */
}

/* The thread's stack, so that no load leaves it. */
static bool stack_bounds(struct mt_thread *t)
{
	pthread_attr_t attr;
	void *lo;
	size_t size;

	if (t->stack_hi)
		return t->stack_hi != 1;
	t->stack_hi = 1; /* "unknown": libunwind for this thread */
	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return false;
	if (pthread_attr_getstack(&attr, &lo, &size) == 0) {
		t->stack_lo = (uintptr_t)lo;
		t->stack_hi = (uintptr_t)lo + size;
	}
	pthread_attr_destroy(&attr);
	return t->stack_hi != 1;
}

/*
 * A thread's last walk, as register states stored outermost first:
 * f[0] is the outermost frame reached, f[n - 1] the state inside
 * mt_stack_walked itself. Each state is what stepping out of the one below
 * gave; loaded says how its bp was found (0 carried over, k loaded from sp
 * - 8k), and h[i] is the stack hash folded from f[0] down to f[i] (beside
 * the states, which are 32 bytes without it: a count of states is a shift
 * from a difference of pointers, not a multiplication).
 *
 * A new walk that reaches a state equal to one of these (same ip and sp,
 * and same bp unless the walk reloads bp before any rule reads it, as in
 * code without frame pointers, where bp holds anything) would go on exactly
 * as the old one did if every stack word the old walk
 * read above it still holds the same value; checking that takes independent
 * loads, not a chain of rule look-ups. Storing outermost first, the shared
 * outer part keeps its place and its hashes: a walk costs what changed.
 */
#define WALK_MAX (MT_MAX_DEPTH + 16)
struct mt_frame {
	uintptr_t ip, sp, bp;
	uint8_t loaded; /* bp came from sp - 8 * loaded; 0: carried from the state below */
	bool rbp_cfa;   /* the step out of this state computed the CFA from bp */
	bool bp_live;   /* this state's bp is used before the walk reloads it */
};

/*
 * The stack words a walk read, outermost first, as the states they made:
 * state i's return address (at its sp - 8) and, when a state above uses it,
 * the bp it loaded: word j is at chk_above[j] - 8 (a return address's is
 * its state's sp, one store fewer a state) and held chk_val[j]. The words
 * of states 0 to c - 1 are words 0 to first[c] - 1, so checking that the
 * walk above state c still holds is one tight run of loads and compares,
 * with nothing to decode. The values are 16-byte aligned (the area is
 * page-aligned): the check compares two words at once (first_changed).
 */
struct mt_walk {
	unsigned n;
	uint32_t gen;
	bool truncated; /* stopped at the frame limit, not at the outermost frame */
	/*
	 * f[-1] as walk's candidate search sees it: sp UINTPTR_MAX, above every
	 * state, ends the search with no test of its own (set by mt_area_get)
	 */
	struct mt_frame below;
	struct mt_frame f[WALK_MAX];
	uint64_t h[WALK_MAX];
	_Alignas(16) uintptr_t chk_val[2 * WALK_MAX];
	uintptr_t chk_above[2 * WALK_MAX];
	uint16_t first[WALK_MAX + 1];
};
_Static_assert(offsetof(struct mt_walk, chk_val) % 16 == 0 && sizeof(struct mt_area) % 16 == 0,
               "first_changed's aligned loads");
_Static_assert(sizeof(struct mt_frame) == 32, "a count of states is a shift");
_Static_assert(offsetof(struct mt_walk, f) ==
                       offsetof(struct mt_walk, below) + sizeof(struct mt_frame),
               "below is f[-1]");

/*
 * libgcc takes its object_mutex around a malloc while it sorts the FDEs of
 * objects registered with __register_frame_info; asking _Unwind_Find_FDE for
 * a rule from under it would deadlock. Such a stack has a libgcc frame.
 */
static bool from_libgcc(const struct mt_frame *f, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (f[i].ip >= libgcc_lo && f[i].ip < libgcc_hi)
			return true;
	return false;
}

/*
 * first_changed's answer once a word changed: out of line, so that the
 * check saves no register. The state of word j is the one whose words
 * (first[s] to first[s + 1] - 1, at least its return address) hold it:
 * found going down with j, not stored with every word by finish_from.
 */
static __attribute__((noinline)) int where_changed(const struct mt_walk *w, unsigned c)
{
	unsigned s = c;

	for (unsigned j = w->first[c]; j-- > 0;) {
		while (w->first[s] > j)
			s--;
		if (*(const uintptr_t *)(w->chk_above[j] - 8) != w->chk_val[j])
			return (int)s;
	}
	return -1;
}

/* Two stack words, below a and below b, as one vector. */
static inline __m128i load_two(uintptr_t a, uintptr_t b)
{
	return _mm_castpd_si128(
	        _mm_loadh_pd(_mm_castsi128_pd(_mm_loadl_epi64((const __m128i *)(a - 8))),
	                     (const double *)(b - 8)));
}

/* Whether any of w's first n stack words changed since w was walked. */
static inline __attribute__((always_inline)) bool words_differ(const struct mt_walk *w, unsigned n)
{
	const uintptr_t *a = w->chk_above, *eights = a + (n & ~7u), *twos = a + (n & ~1u);
	const __m128i *v = (const __m128i *)w->chk_val;
	__m128i diff = _mm_setzero_si128();
	uintptr_t rest = 0;

	/*
	 * Most checks find nothing changed (a loop allocating from one place
	 * checks its whole stack, 26 words on bench small): every word is
	 * compared first with no branch of its own, two to an SSE2 compare
	 * (x86_64's baseline), and only a check that failed is run again to
	 * say where.
	 */
#define MT_CHECK_TWO(i) _mm_xor_si128(load_two(a[2 * (i)], a[2 * (i) + 1]), v[i])
	for (; a != eights; a += 8, v += 4)
		diff = _mm_or_si128(diff,
		                    _mm_or_si128(_mm_or_si128(MT_CHECK_TWO(0), MT_CHECK_TWO(1)),
		                                 _mm_or_si128(MT_CHECK_TWO(2), MT_CHECK_TWO(3))));
	for (; a != twos; a += 2, v++)
		diff = _mm_or_si128(diff, MT_CHECK_TWO(0));
#undef MT_CHECK_TWO
	if (n & 1)
		rest = *(const uintptr_t *)(a[0] - 8) ^ w->chk_val[n - 1];
	return MT_UNLIKELY(rest ||
	                   _mm_movemask_epi8(_mm_cmpeq_epi8(diff, _mm_setzero_si128())) != 0xffff);
}

/*
 * The innermost state above c (index below c) whose stack words changed
 * since w was walked, or -1 when none did. A state the new walk shares with
 * the old one often belongs to another call path of the same depth; the
 * check then stops where the paths part, and every later candidate inside
 * that state fails there too.
 */
static inline __attribute__((always_inline)) int words_changed(const struct mt_walk *w, unsigned c)
{
	return words_differ(w, w->first[c]) ? where_changed(w, c) : -1;
}

/* words_changed as a call, for unwind's check (walk's candidates check in line). */
static __attribute__((noinline)) int first_changed(const struct mt_walk *w, unsigned c)
{
	return words_changed(w, c);
}

/*
 * States from on, once the walk is stored: their hashes, which states' bp
 * matters to the walk above them (the outermost's when the walk was cut: a
 * later walk may go on from it), and the words to check. A bp loaded into a
 * state that nothing above uses (code without frame pointers) is not the
 * walk's business, and is not checked.
 */
static void finish_from(struct mt_walk *w, unsigned from)
{
	/* in locals: every bool stored through w may alias any field of w for the compiler */
	struct mt_frame *f = &w->f[from], *end = &w->f[w->n];
	size_t j = w->first[from], i = from; /* size_t: no zero extension at every index */
	/* the state above uses the bp it carries over from this one */
	bool passes_on =
	        from == 0 ? w->truncated : !w->f[from - 1].loaded && w->f[from - 1].bp_live;
	uint64_t h = from == 0 ? MT_HASH_SEED : w->h[from - 1];

	for (; f != end; f++, i++) {
		/* read before any store: a word's store may alias them for the compiler (bp, read
		 * after, only where loaded: most states carry theirs over) */
		uintptr_t ip = f->ip, sp = f->sp;
		unsigned loaded = f->loaded;
		bool live = f->rbp_cfa || passes_on;

		h = mt_hash_fold(h, ip);
		w->h[i] = h;
		f->bp_live = live;
		w->first[i] = (uint16_t)j;
		w->chk_above[j] = sp;
		w->chk_val[j] = ip;
		j++;
		if (loaded) { /* this state's bp was loaded: checked if used, not passed on */
			if (live) {
				w->chk_above[j] = sp - 8 * loaded + 8;
				w->chk_val[j++] = f->bp;
			}
			passes_on = false;
		} else {
			passes_on = live;
		}
	}
	w->first[i] = (uint16_t)j;
}

#define AREA_BYTES (sizeof(struct mt_area) + sizeof(struct mt_walk))

struct mt_area *mt_area_get(struct mt_thread *t)
{
	if (MT_UNLIKELY(!t->area)) {
		uint8_t *p = mt_own_map(AREA_BYTES);
		if (p == MAP_FAILED)
			return NULL;
		t->area = (struct mt_area *)p;
		t->area->walk = (struct mt_walk *)(p + sizeof(struct mt_area));
		t->area->walk->below.sp = UINTPTR_MAX;
		mt_ids_init(t->area);
	}
	return t->area;
}

void mt_area_release(struct mt_thread *t)
{
	if (t->area) {
		mt_ids_release(t->area);
		mt_own_unmap(t->area, AREA_BYTES);
	}
	t->area = NULL;
}

enum step { STEP_NEXT, STEP_END, STEP_LIBUNWIND };

/* A word read as a return address that cannot be one: the walk ends before it. */
static inline bool not_code(uintptr_t ip)
{
	return ip - 4096 > IP_MASK - 4096;
}

/*
 * Slow path: ip's rule is not in its slot; computed and stored there. 0
 * when the walk must go to libunwind before asking (seen/nseen: the states
 * walked so far, for the libgcc check).
 */
static __attribute__((noinline)) uint64_t rule_miss(_Atomic uint64_t *s, uintptr_t ip,
                                                    const struct mt_frame *seen, unsigned nseen)
{
	uint64_t r;

	if (from_libgcc(seen, nseen))
		return 0;
	int err = errno; /* _Unwind_Find_FDE walks the loader's list; mmap */
	r = compute_rule(ip);
	if (!r)
		r = RULE(ip, LIBUNWIND_ONLY);
	atomic_store_explicit(s, r, memory_order_relaxed);
	rule_made();
	errno = err;
	return r;
}

/*
 * One step out of state f (whose rbp_cfa it sets) into next, by the cached
 * rule of f's return address (extend_outwards' step; walk's loop does the
 * same on its locals, and the two must agree); cache is the rule cache as
 * the walk began (a replaced cache stays mapped). next's bp_live (and
 * hash) are the caller's to set. A return address is never 0 (the walk
 * stops below 4096), so an empty slot reads as another address's.
 */
static inline __attribute__((always_inline)) enum step
step(struct mt_thread *t, uintptr_t cache, struct mt_frame *f, struct mt_frame *next,
     const struct mt_frame *seen, unsigned nseen)
{
	_Atomic uint64_t *s = slot(cache, f->ip);
	uint64_t r = atomic_load_explicit(s, memory_order_relaxed);
	uintptr_t cfa, k, off;

	if (MT_UNLIKELY(RULE_IP(r) != f->ip) && !(r = rule_miss(s, f->ip, seen, nseen)))
		return STEP_LIBUNWIND;
	off = OFF_FIELD(r);
	if (MT_UNLIKELY(!off)) /* outermost frame, or libunwind's */
		return r == RULE(f->ip, LIBUNWIND_ONLY) ? STEP_LIBUNWIND : STEP_END;
	f->rbp_cfa = r & RULE_RBP;
	cfa = (f->rbp_cfa ? f->bp : f->sp) + off * 8;
	if (MT_UNLIKELY(cfa <= f->sp || cfa > t->stack_hi))
		return STEP_END; /* not a stack we can trust */
	k = K_FIELD(r);
	next->sp = cfa;
	next->bp = f->bp;
	next->loaded = 0;
	next->rbp_cfa = false;
	if (k && cfa - 8 * k >= t->stack_lo) {
		next->bp = *(const uintptr_t *)(cfa - 8 * k);
		next->loaded = (uint8_t)k;
	}
	next->ip = *(const uintptr_t *)(cfa - 8);
	return MT_UNLIKELY(not_code(next->ip)) ? STEP_END : STEP_NEXT;
}

/*
 * A walk that reused the outer part of a walk cut at the frame limit, but
 * is shallower inside: the stack goes on above w->f[0]. Walks on from there
 * and puts the states found in front. 0, or -1 for libunwind.
 */
static int extend_outwards(struct mt_thread *t, uintptr_t cache, struct mt_walk *w, unsigned max)
{
	struct mt_frame outer[WALK_MAX]; /* innermost first */
	struct mt_frame cur = w->f[0];
	unsigned m = 0;
	enum step e = STEP_NEXT;

	while (w->n + m < max) {
		e = step(t, cache, &cur, &outer[m], w->f, w->n);
		if (e == STEP_LIBUNWIND)
			return -1;
		if (m == 0)
			w->f[0].rbp_cfa = cur.rbp_cfa;
		else
			outer[m - 1].rbp_cfa = cur.rbp_cfa;
		if (e == STEP_END)
			break;
		cur = outer[m++];
	}
	memmove(&w->f[m], &w->f[0], w->n * sizeof(w->f[0]));
	for (unsigned i = 0; i < m; i++)
		w->f[i] = outer[m - 1 - i];
	w->n += m;
	w->truncated = e != STEP_END && w->n == max;
	return 0;
}

/*
 * The stack of w's walk again (a loop allocating from one place: 7
 * allocations in 8 on bench small): what walk does when its first state is
 * the last walk's innermost, without walk's set-up. walk would keep w as it
 * is and return w->n, or 0 for a walk that was cut (it holds max states, so
 * it stays cut).
 */
static inline __attribute__((always_inline)) bool same_stack(const struct mt_walk *w, uintptr_t ip,
                                                             uintptr_t sp, uintptr_t bp)
{
	const struct mt_frame *last;

	if (MT_UNLIKELY(!w->n))
		return false;
	last = &w->f[w->n - 1];
	return last->ip == ip && last->sp == sp && (!last->bp_live || last->bp == bp) &&
	       first_changed(w, w->n - 1) < 0;
}

/*
 * Hot path: the id of the last stack, when the caller's stack is that one
 * again (a loop allocating from one place: 7 allocations in 8 on bench
 * small), else 0. mt_stack_current's short way: what unwind would find
 * (the walk kept as it is, so the same hash) without its set-up, the hash's
 * finish and the id cache. mt_self.again_id is set only for a walk of this
 * walker (not libunwind's) whose id mt_stack_current took with no Python
 * frames.
 */
uint32_t mt_unwind_again(void)
{
	struct mt_thread *t = &mt_self;
	struct mt_area *area = t->area;
	const struct mt_walk *w;
	const struct mt_frame *last;

	/* the caller's ip and sp are again_ip and again_sp (mt_stack_current tested them) */
	if (!t->again_id || MT_UNLIKELY(!area))
		return 0;
	/* same_stack's tests but those that hold: again_ip and again_sp are the walk's innermost
	 * state's (mt_stack_found), and the walk holds one at least */
	w = area->walk;
	last = &w->f[w->n - 1];
	if (w->gen != mt_module_gen || (last->bp_live && last->bp != t->caller_bp) ||
	    words_differ(w, w->first[w->n - 1]))
		return 0;
	return t->again_id;
}

/*
 * GCC packs a state's ip and sp into a vector register to store them
 * together: four instructions where two stores do (6 a malloc/free pair on
 * bench small and churn).
 */
#if defined(__GNUC__) && !defined(__clang__)
#define MT_NO_SLP __attribute__((optimize("no-tree-slp-vectorize")))
#else
#define MT_NO_SLP
#endif

/*
 * Walks the stack from (ip, sp, bp), at most max states, into w, reusing
 * what still holds of the walk w holds. Returns the index from which w's
 * hashes must be recomputed, or -1 when a frame needs libunwind.
 */
static inline __attribute__((always_inline)) MT_NO_SLP int
walk(struct mt_thread *t, struct mt_walk *w, uintptr_t ip, uintptr_t sp, uintptr_t bp, unsigned max)
{
	/* the new states, innermost last (top[-i] is the i-th), so that they are stored, outermost
	 * first, with one copy */
	struct mt_frame fresh[WALK_MAX], *top = &fresh[WALK_MAX - 1];
	uintptr_t cache =
	        atomic_load_explicit(&rules, memory_order_acquire); /* pairs with rule_made */
	/*
	 * step's work, on locals: the state reached, the cache's and the
	 * stack's bounds, the candidate (the old state cand). Stored through f
	 * and the old walk, they were reloaded after every store. The
	 * candidate's sp is read where it is compared (an operand of the
	 * compare, as cheap as a register, which the loop lacks).
	 */
	const _Atomic uint64_t *words =
	        (const _Atomic uint64_t *)(cache & ~(uintptr_t)RULE_BITS_FIELD);
	unsigned shift = 64 - (unsigned)(cache & RULE_BITS_FIELD);
	uintptr_t lo = t->stack_lo, hi = t->stack_hi;
	unsigned k, from;
	int keep = -1; /* w->f[0..keep] stays */
	bool was_truncated = w->truncated, dropped = false;
	const struct mt_frame *old = w->f;
	const struct mt_frame *changed = old + w->n; /* candidates at or above changed fail */
	/* w->f[-1] is w->below, whose sp UINTPTR_MAX says no candidate is left */
	const struct mt_frame *cand = old + w->n - 1;
	/* the state reached, top[-(k - 1)] (k counted at the end), and the last that max allows */
	struct mt_frame *f = top, *const last = top - (max - 1);

	top[0] = (struct mt_frame){ip, sp, bp, 0, false, true};
	for (;;) {
		while (cand->sp < sp)
			cand--;
		if (MT_UNLIKELY(cand->sp == sp) && cand->ip == ip && cand < changed &&
		    (!cand->bp_live || cand->bp == bp)) {
			int c = words_changed(w, (unsigned)(cand - old));
			if (c < 0) {
				keep = (int)(cand - old);
				f++; /* the state reached is state keep */
				break;
			}
			changed = old + c;
		}
		if (f == last) {
			if (MT_UNLIKELY(not_code(ip)))
				f++; /* the state is not one, see below */
			else
				f->rbp_cfa = false;
			break;
		}
		_Atomic uint64_t *s =
		        (_Atomic uint64_t *)&words[(ip * 0x9e3779b97f4a7c15u) >> shift];
		uint64_t r = atomic_load_explicit(s, memory_order_relaxed);
		uintptr_t cfa, off, kk;
		uint8_t loaded = 0;

		/*
		 * A return address that cannot be one (below 4096 or above IP_MASK)
		 * ends the walk before the state it was loaded into, as step's test
		 * does; tested here, where only such an address can come (it is in
		 * no cache word, and 0 reads an empty one as the outermost rule), not
		 * at every load.
		 */
		if (MT_UNLIKELY(RULE_IP(r) != ip)) {
			if (MT_UNLIKELY(not_code(ip))) {
				f++;
				break;
			}
			if (!(r = rule_miss(s, ip, f, (unsigned)(top - f) + 1)))
				return -1;
		}
		off = OFF_FIELD(r);
		/* set here for every state but the last, and where the walk stops after it */
		f->rbp_cfa = (bool)(r & RULE_RBP);
		cfa = (r & RULE_RBP ? bp : sp) + off * 8;
		if (MT_UNLIKELY(cfa <= sp || cfa > hi)) {
			if (MT_UNLIKELY(not_code(ip)))
				f++; /* 0, in an empty word */
			else if (MT_UNLIKELY(r == RULE(ip, LIBUNWIND_ONLY)))
				return -1;
			break; /* the outermost frame, or not a stack we can trust */
		}
		kk = K_FIELD(r);
		if (kk && cfa - 8 * kk >= lo) {
			bp = *(const uintptr_t *)(cfa - 8 * kk);
			loaded = (uint8_t)kk;
		}
		ip = *(const uintptr_t *)(cfa - 8);
		sp = cfa;
		f--;
		/* h and bp_live are finish_from's, rbp_cfa the next step's */
		f->ip = ip;
		f->sp = sp;
		f->bp = bp;
		f->loaded = loaded;
	}
	k = (unsigned)(top - f) + 1;
	if (keep + 1 + k > max) {
		/* deeper than the limit: keep the innermost max states */
		unsigned drop = keep + 1 + k - max;
		memmove(&w->f[0], &w->f[drop], (size_t)(keep + 1 - drop) * sizeof(w->f[0]));
		keep -= (int)drop;
		w->truncated = dropped = true;
	} else {
		w->truncated = keep < 0 ? k == max : was_truncated && keep + 1 + k == max;
	}
	memcpy(&w->f[keep + 1], top - (k - 1), k * sizeof(*top));
	w->n = (unsigned)(keep + 1) + k;
	bool extend = keep >= 0 && was_truncated && w->n < max;
	if (extend && extend_outwards(t, cache, w, max) < 0)
		return -1;
	/* the new states, or all after extending or cutting (the outermost changed) */
	from = extend || dropped ? 0 : (unsigned)(keep + 1);
	finish_from(w, from);
	return w->truncated || was_truncated ? 0 : keep + 1;
}

/* A walk's answer: the stack's hash and depth. */
struct unwound {
	uint64_t hash;
	int n;
};

/*
 * libunwind walks from here: its first frames are memtrace's own, up to the
 * interposed function; the caller's frame follows them.
 */
static struct unwound fallback(struct mt_area *area, int max)
{
	void *buf[WALK_MAX];
	int err = errno, n, skip = 0;

	mt_unwind_pipe_enter();
	n = unw_backtrace(buf, max + 16);
	mt_unwind_pipe_leave();
	errno = err;
	while (skip < n && mt_in_self((uintptr_t)buf[skip]))
		skip++;
	n -= skip;
	if (n > max)
		n = max;
	if (area) {
		__builtin_memcpy(area->fallback, buf + skip, (size_t)n * sizeof(void *));
		area->walk->n = 0;
		area->in_fallback = true;
	}
	return (struct unwound){mt_hash_frames(buf + skip, n), n};
}

/*
 * The hash and depth of the stack of the last MT_MARK_CALLER, at most max
 * frames. walk is inlined: churn walks at every allocation, and a call
 * saves six registers.
 */
static inline __attribute__((always_inline)) MT_NO_SLP struct unwound unwind(int max)
{
	struct mt_thread *t = &mt_self;
	struct mt_area *area;
	struct mt_walk *w;
	int from, n, i;
	uint64_t h;

	if (MT_UNLIKELY(!t->area || !t->stack_hi)) {
		/* a thread's first stack: an mmap, and pthread_getattr_np reads /proc */
		int err = errno;
		mt_area_get(t);
		stack_bounds(t);
		errno = err;
	}
	area = t->area;
	/* stack_hi is known by now; 1 (unknown: libunwind) fails the last test. No rule
	 * cache: libunwind does every walk (MEMTRACE_UNWIND=libunwind too, mt_unwind_init) */
	if (MT_UNLIKELY(!area || !atomic_load_explicit(&rules, memory_order_relaxed) ||
	                !t->caller_ip || t->caller_sp <= t->stack_lo || t->caller_sp > t->stack_hi))
		return fallback(area, max);
	area->in_fallback = false;
	w = area->walk;
	if (MT_UNLIKELY(w->gen != mt_module_gen)) {
		w->n = 0;
		w->gen = mt_module_gen;
	}
	/*
	 * mt_stack_current, this walk's caller, asked mt_unwind_again first
	 * unless Python frames are walked: with a last id noted, same_stack
	 * fails as it did (churn's every allocation)
	 */
	if ((!t->again_id || MT_UNLIKELY(mt_python_on)) &&
	    same_stack(w, t->caller_ip, t->caller_sp, t->caller_bp))
		from = w->truncated ? 0 : (int)w->n;
	else
		from = walk(t, w, t->caller_ip, t->caller_sp, t->caller_bp, (unsigned)max);
	if (MT_UNLIKELY(from < 0))
		return fallback(area, max);
	n = (int)w->n;
	if (w->truncated) {
		/* the prefix hashes start at the cut, not at the outermost frame */
		h = MT_HASH_SEED;
		for (i = 0; i < n; i++)
			h = mt_hash_fold(h, w->f[i].ip);
		return (struct unwound){mt_hash_finish(h, (unsigned)n), n};
	}
	/* finish_from folded the hashes of the states walk made */
	return (struct unwound){mt_hash_finish(n ? w->h[n - 1] : MT_HASH_SEED, (unsigned)n), n};
}

MT_NO_SLP uint32_t mt_stack_walked(void)
{
	struct unwound u = unwind((int)mt_config.depth);

	return mt_stack_found(u.hash, u.n);
}

void mt_unwind_frames(void **frames, int n)
{
	struct mt_area *area = mt_self.area;

	if (area->in_fallback) {
		__builtin_memcpy(frames, area->fallback, (size_t)n * sizeof(void *));
		return;
	}
	/* the innermost state in a local: each store through frames may alias the walk */
	const struct mt_frame *f = &area->walk->f[area->walk->n - 1];
	for (int i = 0; i < n; i++)
		frames[i] = (void *)f[-i].ip;
}

void mt_unwind_init(void)
{
	void *p;

	if (!mt_config.fast_unwind ||
	    !mt_module_range((uintptr_t)&_Unwind_Find_FDE, &libgcc_lo, &libgcc_hi))
		return; /* libunwind does every walk: no rule cache */
	p = rules_map(RULE_BITS_FIRST);
	if (p != MAP_FAILED)
		atomic_store(&rules, (uintptr_t)p | RULE_BITS_FIRST);
}

void mt_unwind_forget(void)
{
	uintptr_t r = atomic_load(&rules);

	if (r)
		__builtin_memset((void *)(r & ~(uintptr_t)RULE_BITS_FIELD), 0,
		                 sizeof(uint64_t) << (r & RULE_BITS_FIELD));
}

#else

uint32_t mt_stack_walked(void)
{
	struct mt_area *area = mt_area_get(&mt_self);
	int max = (int)mt_config.depth;
	void *buf[MT_MAX_DEPTH + 16];
	int n, skip = 0;

	mt_unwind_pipe_enter();
	n = unw_backtrace(buf, max + 16);
	mt_unwind_pipe_leave();

	while (skip < n && mt_in_self((uintptr_t)buf[skip]))
		skip++;
	n -= skip;
	if (n > max)
		n = max;
	if (area)
		__builtin_memcpy(area->fallback, buf + skip, (size_t)n * sizeof(void *));
	return mt_stack_found(mt_hash_frames(buf + skip, n), area ? n : 0);
}

void mt_unwind_frames(void **frames, int n)
{
	__builtin_memcpy(frames, mt_self.area->fallback, (size_t)n * sizeof(void *));
}

uint32_t mt_unwind_again(void)
{
	return 0; /* libunwind walks every stack */
}

struct mt_area *mt_area_get(struct mt_thread *t)
{
	if (MT_UNLIKELY(!t->area)) {
		void *p = mt_own_map(sizeof(struct mt_area));
		if (p == MAP_FAILED)
			return NULL;
		t->area = p;
		mt_ids_init(t->area);
	}
	return t->area;
}

void mt_area_release(struct mt_thread *t)
{
	if (t->area) {
		mt_ids_release(t->area);
		mt_own_unmap(t->area, sizeof(struct mt_area));
	}
	t->area = NULL;
}

void mt_unwind_init(void)
{
}

void mt_unwind_forget(void)
{
}

#endif
