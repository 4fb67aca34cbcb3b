/* SPDX-License-Identifier: MIT */
/*
 * Python frames (docs/python.md): in a process that runs CPython 3.10 to
 * 3.13, the allocating thread's Python frames are read from the
 * interpreter's own frame chain and put at the end of the STACK record;
 * each code object is described once per process instance (PYCODE). No
 * profile or trace hook: a Python call that allocates nothing costs
 * nothing.
 *
 * The thread state is the one PyGILState_GetThisThreadState() gives: the
 * thread's own, found through the interpreter's thread-specific key, so it
 * is there while the thread runs C code with the GIL released (most torch
 * operators do), when the interpreter's "current" state is NULL or
 * another thread's. Only this thread changes its frame chain, and it is
 * inside an allocation: the chain is whole, except for frames being pushed,
 * which are not linked yet.
 *
 * Every read is checked before it is made: a pointer is followed only into
 * a page known readable, and a page is known after process_vm_readv read it
 * without a fault. Pages leave the set when munmap or mremap (interposed)
 * give them back; the set is cleared when it fills. What remains is a
 * pointer into memory another thread unmaps between the check and the read:
 * the current thread's own live frames and code objects cannot be, so only
 * a corrupt chain could, and a chain is believed only as far as each frame's
 * code object has the type PyCode_Type. A walk stops after
 * MT_MAX_PYFRAMES frames or 4 * MT_MAX_PYFRAMES links (a cycle).
 *
 * A code object's id is its slot in an open-addressing table of 64-bit keys
 * made of its address and the addresses of its file name, name and line
 * table and its first line: an object freed and another made at its address
 * get different keys. The thread that claims a slot writes the PYCODE
 * record. The table is per process instance: a fork child starts empty.
 *
 * Context: init (mt_python_detect), slow path (mt_modules_check after a
 * dlopen), hot path (mt_python_walk, mt_python_forget), fork child.
 * May not: allocate with malloc, take a lock, call into Python beyond the
 * four functions resolved below, none of which allocates or locks.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mt.h"
#include "python-layout.h"

#define PAGE_BITS     12
#define SET_BITS      15 /* known-readable pages: 32,768 slots */
#define SET_LIMIT     ((1u << SET_BITS) / 4 * 3)
#define REGION_SHIFT  9  /* pages per region: 2 MiB */
#define REGION_BITS   12 /* regions holding known pages: 4,096 slots */
#define CODE_BITS     18 /* code objects: 262,144 slots */
#define PYSTACK_BITS  18 /* Python stacks: 262,144 slots */
#define PYSTACK_LIMIT ((1u << PYSTACK_BITS) / 4 * 3)
#define CODE_LIMIT    ((1u << CODE_BITS) / 4 * 3)
#define TOMBSTONE     1ull

bool mt_python_on;
bool mt_python_pending;

static struct {
	const struct mt_py_layout *l;
	uintptr_t code_type; /* &PyCode_Type */
	void *(*this_thread_state)(void);
	int (*is_initialized)(void);
	int (*is_finalizing)(void);
	_Atomic uint64_t *pages;   /* page number + 2; 0 free, TOMBSTONE gone */
	_Atomic uint64_t *regions; /* region number + 2 of every page ever added */
	_Atomic unsigned pages_used;
	_Atomic uint64_t *codes; /* keys; 0 free */
	_Atomic unsigned codes_used;
	_Atomic uint64_t *pystacks; /* keys; 0 free */
	_Atomic unsigned pystacks_used;
	_Atomic bool pystacks_full_said;
	/* munmap and mremap calls seen: the age of the threads' page caches */
	_Atomic uint64_t forgets;
	_Atomic bool full_said;
	bool tried_once;
} py;

static uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 33);
}

/* ---- pages known readable ---- */

static bool page_known(uint64_t page)
{
	uint64_t key = page + 2, mask = (1u << SET_BITS) - 1;

	for (uint64_t i = mix64(page) & mask, n = 0; n < 64; i = (i + 1) & mask, n++) {
		uint64_t k = atomic_load_explicit(&py.pages[i], memory_order_acquire);
		if (k == key)
			return true;
		if (!k)
			return false;
	}
	return false;
}

/* Region r (2 MiB) holds a known page; the regions are as many as fit, then all "known". */
static void region_add(uint64_t r)
{
	uint64_t mask = (1u << REGION_BITS) - 1;

	for (uint64_t i = mix64(r) & mask, n = 0; n < 64; i = (i + 1) & mask, n++) {
		uint64_t k = 0;
		if (atomic_compare_exchange_strong(&py.regions[i], &k, r + 2) || k == r + 2)
			return;
	}
}

static void page_add(uint64_t page)
{
	uint64_t key = page + 2, mask = (1u << SET_BITS) - 1;

	if (atomic_fetch_add_explicit(&py.pages_used, 1, memory_order_relaxed) >= SET_LIMIT) {
		/* full (tombstones count): forget everything, learn again; the threads' caches
		 * go too, as a later munmap of their pages would not find them here */
		for (unsigned i = 0; i < (1u << SET_BITS); i++)
			atomic_store_explicit(&py.pages[i], 0, memory_order_relaxed);
		atomic_store(&py.pages_used, 1);
		atomic_fetch_add_explicit(&py.forgets, 1, memory_order_release);
	}
	region_add(page >> REGION_SHIFT);
	for (uint64_t i = mix64(page) & mask, n = 0; n < 64; i = (i + 1) & mask, n++) {
		uint64_t k = 0;
		if (atomic_compare_exchange_strong(&py.pages[i], &k, key) || k == key)
			return;
	}
}

/*
 * Can [addr, addr + n) be read without a fault? Asks this thread's small
 * cache of pages (valid while no munmap or mremap came since: py.forgets
 * counts them), then the shared set, then process_vm_readv, which learns
 * the page. Without scratch memory (detection) the thread cache is skipped.
 */
static __attribute__((noinline)) bool readable_slow(uintptr_t addr, size_t n)
{
	struct mt_area *area = mt_self.area;
	uint64_t first = addr >> PAGE_BITS, last = (addr + n - 1) >> PAGE_BITS;
	uint64_t gen = atomic_load_explicit(&py.forgets, memory_order_acquire);

	if (addr < 4096 || addr + n < addr)
		return false;
	if (area && area->py_pages_gen != gen) {
		memset(area->py_pages, 0, sizeof(area->py_pages));
		area->py_pages_gen = gen;
	}
	for (uint64_t page = first; page <= last; page++) {
		uint64_t *mine = area ? &area->py_pages[page % MT_PY_PAGE_CACHE] : NULL;
		char byte;
		struct iovec local = {&byte, 1};
		struct iovec remote = {(void *)(uintptr_t)(page << PAGE_BITS), 1};

		if (mine && *mine == page + 2)
			continue;
		if (!page_known(page)) {
			if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != 1)
				return false;
			page_add(page);
		}
		if (mine)
			*mine = page + 2;
	}
	return true;
}

/*
 * readable_slow's answer where this thread's cache has it at hand: a walk
 * asks twice a frame, nearly always of one page the cache holds (10.8
 * million times in a PYTHONMALLOC=malloc run of bench-python 2000, where
 * the call with its loop over pages cost 64 instructions: 29% of all).
 */
static inline __attribute__((always_inline)) bool readable(uintptr_t addr, size_t n)
{
	struct mt_area *area = mt_self.area;
	uint64_t page = addr >> PAGE_BITS;

	if (MT_LIKELY(area && addr >= 4096 && page == (addr + n - 1) >> PAGE_BITS &&
	              area->py_pages[page % MT_PY_PAGE_CACHE] == page + 2 &&
	              area->py_pages_gen ==
	                      atomic_load_explicit(&py.forgets, memory_order_acquire)))
		return true;
	return readable_slow(addr, n);
}

/* Does the set hold a page of 2 MiB region r? Regions are never removed, only cleared. */
static bool region_known(uint64_t r)
{
	uint64_t mask = (1u << REGION_BITS) - 1;

	for (uint64_t i = mix64(r) & mask, n = 0; n < 64; i = (i + 1) & mask, n++) {
		uint64_t k = atomic_load_explicit(&py.regions[i], memory_order_acquire);
		if (k == r + 2)
			return true;
		if (!k)
			return false;
	}
	return true; /* cannot tell: assume so */
}

void mt_python_forget(uintptr_t addr, size_t len)
{
	uint64_t first = addr >> PAGE_BITS, last = (addr + len - 1) >> PAGE_BITS;
	bool known = false;

	if (!py.pages || !len)
		return;
	/* most unmapped memory (freed tensors, big buffers) was never read here: nothing to do */
	if ((last >> REGION_SHIFT) - (first >> REGION_SHIFT) > 64)
		known = true;
	for (uint64_t r = first >> REGION_SHIFT; !known && r <= last >> REGION_SHIFT; r++)
		known = region_known(r);
	if (!known)
		return;
	/* every thread's own cache is stale from now on; the shared set loses the pages */
	atomic_fetch_add_explicit(&py.forgets, 1, memory_order_release);
	if (last - first < 64) {
		uint64_t mask = (1u << SET_BITS) - 1;
		for (uint64_t page = first; page <= last; page++)
			for (uint64_t i = mix64(page) & mask, n = 0; n < 64;
			     i = (i + 1) & mask, n++) {
				uint64_t k = atomic_load(&py.pages[i]);
				if (!k)
					break;
				if (k == page + 2) {
					atomic_store(&py.pages[i], TOMBSTONE);
					break;
				}
			}
		return;
	}
	for (unsigned i = 0; i < (1u << SET_BITS); i++) {
		uint64_t k = atomic_load_explicit(&py.pages[i], memory_order_relaxed);
		if (k > TOMBSTONE && k - 2 >= first && k - 2 <= last)
			atomic_store(&py.pages[i], TOMBSTONE);
	}
}

static uintptr_t load_ptr(uintptr_t at)
{
	return readable(at, sizeof(uintptr_t)) ? *(const uintptr_t *)at : 0;
}

/* ---- code objects ---- */

/*
 * readable in a walk, whose start made area's page cache current (walk_pages): a page
 * the cache holds needs no look at py.forgets.
 */
static inline __attribute__((always_inline)) bool known(const struct mt_area *area, uintptr_t addr,
                                                        size_t n)
{
	uint64_t page = addr >> PAGE_BITS;

	if (MT_LIKELY(addr >= 4096 && page == (addr + n - 1) >> PAGE_BITS &&
	              area->py_pages[page % MT_PY_PAGE_CACHE] == page + 2))
		return true;
	return readable_slow(addr, n);
}

/* obj is a code object whose fields python.c reads (span bytes) are readable. */
static inline __attribute__((always_inline)) bool is_code(const struct mt_area *area, uintptr_t obj,
                                                          size_t span)
{
	return obj && known(area, obj, span) &&
	       *(const uintptr_t *)(obj + MT_PY_OB_TYPE) == py.code_type;
}

/* A str object as UTF-8 into buf (at most cap bytes, whole characters); its length. */
static size_t str_utf8(uintptr_t obj, uint8_t *buf, size_t cap)
{
	const struct mt_py_layout *l = py.l;
	size_t len, out = 0;
	unsigned state, kind;
	uintptr_t data;

	if (!obj || !readable(obj, l->compact_size))
		return 0;
	len = *(const size_t *)(obj + MT_PY_STR_LENGTH);
	state = *(const uint32_t *)(obj + MT_PY_STR_STATE);
	kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || (kind != 1 && kind != 2 && kind != 4))
		return 0; /* not compact: an old-style string no code object has */
	data = obj + ((state & (1u << 6)) ? l->ascii_size : l->compact_size);
	if (len > cap)
		len = cap;
	if (!readable(data, len * kind))
		return 0;
	for (size_t i = 0; i < len; i++) {
		uint32_t c = kind == 1   ? ((const uint8_t *)data)[i]
		             : kind == 2 ? ((const uint16_t *)data)[i]
		                         : ((const uint32_t *)data)[i];
		uint8_t e[4];
		size_t n;

		if (c < 0x80)
			e[0] = (uint8_t)c, n = 1;
		else if (c < 0x800)
			e[0] = (uint8_t)(0xc0 | c >> 6), e[1] = (uint8_t)(0x80 | (c & 0x3f)), n = 2;
		else if (c < 0x10000)
			e[0] = (uint8_t)(0xe0 | c >> 12),
			e[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f)),
			e[2] = (uint8_t)(0x80 | (c & 0x3f)), n = 3;
		else
			e[0] = (uint8_t)(0xf0 | (c >> 18 & 7)),
			e[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f)),
			e[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f)),
			e[3] = (uint8_t)(0x80 | (c & 0x3f)), n = 4;
		if (out + n > cap)
			break;
		memcpy(buf + out, e, n);
		out += n;
	}
	return out;
}

/* The PYCODE record of id `id`: a code object's file, name, line table and first line. */
static void write_code(uint32_t id, uintptr_t file, uintptr_t name, uintptr_t table, int first_line)
{
	const struct mt_py_layout *l = py.l;
	uint8_t fbuf[MT_PYCODE_MAX_NAME], nbuf[MT_PYCODE_MAX_NAME];
	size_t flen = str_utf8(file, fbuf, sizeof(fbuf)), nlen = str_utf8(name, nbuf, sizeof(nbuf));
	size_t tsize = 0, tkept = 0;
	uint8_t *rec, *q;

	if (table && readable(table, MT_PY_BYTES_DATA)) {
		ssize_t s = *(const ssize_t *)(table + MT_PY_BYTES_SIZE);
		tsize = s > 0 ? (size_t)s : 0;
		tkept = tsize < MT_PYCODE_MAX_LINETABLE ? tsize : MT_PYCODE_MAX_LINETABLE;
		if (!readable(table + MT_PY_BYTES_DATA, tkept ? tkept : 1))
			tsize = tkept = 0;
	}
	rec = mt_room(4 + 6 * MT_MAX_VARINT + flen + nlen + tkept);
	if (!rec)
		return;
	q = mt_put_varint(rec + 4, id);
	q = mt_put_varint(q, l->version);
	q = mt_put_varint(q, first_line > 0 ? (uint64_t)first_line : 0);
	q = mt_put_bytes(q, fbuf, flen);
	q = mt_put_bytes(q, nbuf, nlen);
	q = mt_put_bytes(q, (const void *)(table + MT_PY_BYTES_DATA), tkept);
	q = mt_put_varint(q, tsize);
	mt_commit_large(rec, MT_REC_PYCODE, q);
}

static void table_full(void)
{
	if (!atomic_exchange(&py.full_said, true))
		mt_say("more than %u distinct Python code objects; later ones are recorded as "
		       "unknown frames",
		       CODE_LIMIT);
}

/*
 * The id of code object `code` (is_code said yes), claiming it and writing
 * PYCODE if new.
 */
static uint32_t code_id(struct mt_area *area, uintptr_t code)
{
	const struct mt_py_layout *l = py.l;
	struct mt_py_code_cache *c = &area->py_codes[(code >> 4) % MT_PY_CODE_CACHE];
	uint64_t mask = (1u << CODE_BITS) - 1, key, i;
	uintptr_t file = *(const uintptr_t *)(code + l->co_filename);
	uintptr_t name = *(const uintptr_t *)(code + l->co_name);
	uintptr_t table = *(const uintptr_t *)(code + l->co_linetable);
	int first_line = *(const int *)(code + l->co_firstlineno);

	/* this thread met it lately: no hash, no probe of the shared table (megabytes wide) */
	if (c->code == code && c->file == file && c->name == name && c->table == table &&
	    c->first_line == first_line && c->id)
		return c->id;
	key = mix64(code ^
	            mix64(file ^ mix64(name ^ mix64(table ^ (uint64_t)(unsigned)first_line))));
	key |= key ? 0 : 1;
	for (i = key & mask;; i = (i + 1) & mask) {
		uint64_t k = atomic_load_explicit(&py.codes[i], memory_order_acquire);
		if (k == key)
			break;
		if (k)
			continue;
		if (atomic_fetch_add_explicit(&py.codes_used, 1, memory_order_relaxed) >=
		    CODE_LIMIT) {
			table_full();
			return 0;
		}
		if (atomic_compare_exchange_strong(&py.codes[i], &k, key)) {
			write_code((uint32_t)i + 1, file, name, table, first_line);
			break;
		}
		atomic_fetch_sub_explicit(&py.codes_used, 1, memory_order_relaxed);
		if (k == key)
			break;
	}
	*c = (struct mt_py_code_cache){code, file, name, table, first_line, (uint32_t)i + 1};
	return c->id;
}

/* ---- Python stacks ---- */

/* The PYSTACK record of id `id`: the frames of area's walk. */
static void write_pystack(uint32_t id, const struct mt_area *area)
{
	uint8_t *rec = mt_room(4 + (2 + 2 * (size_t)area->npy) * MT_MAX_VARINT), *q;

	if (!rec)
		return;
	q = mt_put_varint(rec + 4, id);
	q = mt_put_varint(q, (uint64_t)area->npy);
	for (int i = 0; i < area->npy; i++) {
		q = mt_put_varint(q, area->py[2 * i]);
		q = mt_put_varint(q, area->py[2 * i + 1]);
	}
	mt_commit_large(rec, MT_REC_PYSTACK, q);
}

/*
 * The id of the Python stack area's walk found, whose frames hash to key,
 * interned like a code object (a slot of an open-addressing table of keys,
 * claimed with one compare-and-swap; the claiming thread writes PYSTACK).
 * Equal 64-bit keys of different stacks would share an id, as native ones do.
 */
static uint32_t pystack_id(struct mt_area *area, uint64_t key)
{
	uint64_t mask = (1u << PYSTACK_BITS) - 1, i;

	if (area->py_last_key == key)
		return area->py_last_id;
	for (i = key & mask;; i = (i + 1) & mask) {
		uint64_t k = atomic_load_explicit(&py.pystacks[i], memory_order_acquire);
		if (k == key)
			break;
		if (k)
			continue;
		if (atomic_fetch_add_explicit(&py.pystacks_used, 1, memory_order_relaxed) >=
		    PYSTACK_LIMIT) {
			if (!atomic_exchange(&py.pystacks_full_said, true))
				mt_say("more than %u distinct Python stacks; later ones are "
				       "recorded "
				       "without Python frames",
				       PYSTACK_LIMIT);
			return 0;
		}
		if (atomic_compare_exchange_strong(&py.pystacks[i], &k, key)) {
			write_pystack((uint32_t)i + 1, area);
			break;
		}
		atomic_fetch_sub_explicit(&py.pystacks_used, 1, memory_order_relaxed);
		if (k == key)
			break;
	}
	area->py_last_key = key;
	area->py_last_id = (uint32_t)i + 1;
	return area->py_last_id;
}

/* ---- the walk ---- */

int mt_python_walk(struct mt_area *area, uint64_t *h)
{
	const struct mt_py_layout *l = py.l;
	uintptr_t frame;
	uint64_t fold = 0xcbf29ce484222325ull; /* the frames, FNV-1a-like; mixed once at the end */
	size_t span = (size_t)(l->fr_instr > l->fr_previous ? l->fr_instr : l->fr_previous) + 8;
	size_t code_span =
	        (l->co_code_adaptive > l->co_linetable ? l->co_code_adaptive : l->co_linetable) +
	        sizeof(uintptr_t);
	uint64_t gen = atomic_load_explicit(&py.forgets, memory_order_acquire);
	int n = 0;

	if (l->fr_entry >= 0 && (size_t)l->fr_entry + 1 > span)
		span = (size_t)l->fr_entry + 1;
	if (!py.is_initialized() || (py.is_finalizing && py.is_finalizing()))
		return 0;
	/* the cache is made current once a walk (known): a munmap after this point is one
	 * readable could meet between its check and the read as well */
	if (area->py_pages_gen != gen) {
		memset(area->py_pages, 0, sizeof(area->py_pages));
		area->py_pages_gen = gen;
	}
	frame = (uintptr_t)py.this_thread_state();
	if (!frame)
		return 0;
	frame = load_ptr(frame + l->ts_frame);
	if (frame && l->cframe_current >= 0)
		frame = load_ptr(frame + (uintptr_t)l->cframe_current);
	for (int links = 0; frame && n < MT_MAX_PYFRAMES && links < 4 * MT_MAX_PYFRAMES; links++) {
		uintptr_t code, next;
		uint32_t id, entry = 0;
		int64_t lasti;

		if (!known(area, frame, span))
			break;
		next = *(const uintptr_t *)(frame + l->fr_previous);
		if (l->entry == MT_PY_ENTRY_CSTACK &&
		    *(const uint8_t *)(frame + l->fr_entry) == MT_PY_FRAME_OWNED_BY_CSTACK) {
			/* the shim an activation starts with: the frame inside it is its outermost
			 */
			if (n)
				area->py[2 * (n - 1)] |= MT_PYFRAME_ENTRY;
			frame = next;
			continue;
		}
		code = *(const uintptr_t *)(frame + l->fr_code);
		if (!is_code(area, code, code_span)) {
			/* 3.13 has frames whose executable is None: no code, no line */
			frame = next;
			continue;
		}
		id = code_id(area, code);
		if (l->lasti == MT_PY_LASTI_INDEX) {
			lasti = *(const int *)(frame + l->fr_instr);
			entry = MT_PYFRAME_ENTRY;
		} else {
			uintptr_t instr = *(const uintptr_t *)(frame + l->fr_instr);
			lasti = ((int64_t)instr - (int64_t)(code + l->co_code_adaptive)) / 2;
			if (l->entry == MT_PY_ENTRY_IS_ENTRY &&
			    *(const uint8_t *)(frame + l->fr_entry))
				entry = MT_PYFRAME_ENTRY;
		}
		area->py[2 * n] = id << 1 | entry;
		area->py[2 * n + 1] =
		        lasti < 0 || lasti > (int64_t)UINT32_MAX - 1 ? 0 : (uint32_t)lasti + 1;
		fold = (fold ^ ((uint64_t)area->py[2 * n] << 32 | area->py[2 * n + 1])) *
		       0x100000001b3ull;
		n++;
		frame = next;
	}
	area->npy = n;
	area->pystack = 0;
	if (n) {
		uint64_t key = mix64(fold);
		area->pystack = pystack_id(area, key | (key ? 0 : 1));
		*h = mix64(*h ^ fold);
	}
	return n;
}

/* ---- finding the interpreter ---- */

/* ISO C has no cast from object to function pointer; POSIX guarantees the copy works. */
#define FIND(fn, name)                                                                             \
	do {                                                                                       \
		void *sym_ = dlsym(RTLD_DEFAULT, name);                                            \
		__builtin_memcpy(&(fn), &sym_, sizeof(sym_));                                      \
	} while (0)

/* 3.13: the table's offsets must be what _Py_DebugOffsets says, on a GIL build. */
static bool debug_offsets_agree(const struct mt_py_layout *l)
{
	const uint8_t *rt = dlsym(RTLD_DEFAULT, "_PyRuntime");
	uint64_t v[12];
	static const unsigned at[12] = {
	        MT_PY_DEBUG_FREE_THREADED, MT_PY_DEBUG_TS_FRAME,    MT_PY_DEBUG_FR_PREVIOUS,
	        MT_PY_DEBUG_FR_CODE,       MT_PY_DEBUG_FR_INSTR,    MT_PY_DEBUG_FR_OWNER,
	        MT_PY_DEBUG_CO_FILENAME,   MT_PY_DEBUG_CO_QUALNAME, MT_PY_DEBUG_CO_LINETABLE,
	        MT_PY_DEBUG_CO_FIRSTLINE,  MT_PY_DEBUG_CO_CODE,     MT_PY_DEBUG_VERSION};

	if (!rt || !readable((uintptr_t)rt, MT_PY_DEBUG_CO_CODE + 8) ||
	    memcmp(rt, MT_PY_DEBUG_COOKIE, 8) != 0)
		return false;
	for (int i = 0; i < 12; i++)
		memcpy(&v[i], rt + at[i], 8);
	return v[0] == 0 && v[1] == l->ts_frame && v[2] == l->fr_previous && v[3] == l->fr_code &&
	       v[4] == l->fr_instr && v[5] == (uint64_t)l->fr_entry && v[6] == l->co_filename &&
	       v[7] == l->co_name && v[8] == l->co_linetable && v[9] == l->co_firstlineno &&
	       v[10] == l->co_code_adaptive && (v[11] >> 16 & 0xffff) == l->version;
}

static void *map_table(unsigned bits)
{
	void *p = mt_own_map(sizeof(uint64_t) << bits);
	return p == MAP_FAILED ? NULL : p;
}

/* dl_iterate_phdr: sets mt_python_pending if a libpython3.X is loaded. */
static int find_libpython(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *slash = strrchr(info->dlpi_name, '/');

	(void)size;
	(void)data;
	if (!strncmp(slash ? slash + 1 : info->dlpi_name, "libpython3.", 11))
		mt_python_pending = true;
	return mt_python_pending;
}

void mt_python_detect(void)
{
	const char *(*get_version)(void);
	unsigned major = 0, minor = 0, version;
	const struct mt_py_layout *l = NULL;

	if (py.tried_once || !mt_config.python)
		return;
	/* the symbols every supported interpreter exports; absent: no Python (yet: a later
	 * dlopen can bring it, and mt_modules_check asks again) */
	FIND(py.this_thread_state, "PyGILState_GetThisThreadState");
	FIND(get_version, "Py_GetVersion");
	if (!py.this_thread_state || !get_version) {
		/* a libpython whose dlopen is not done (its constructors allocate): its
		 * symbols become visible when dlopen returns, so look again then */
		mt_python_pending = false;
		dl_iterate_phdr(find_libpython, NULL);
		return;
	}
	mt_python_pending = false;
	py.tried_once = true;
	if (sscanf(get_version(), "%u.%u", &major, &minor) != 2)
		return;
	version = major << 8 | minor;
	for (size_t i = 0; i < sizeof(mt_py_layouts) / sizeof(mt_py_layouts[0]); i++)
		if (mt_py_layouts[i].version == version)
			l = &mt_py_layouts[i];
	if (!l) {
		mt_say("Python %u.%u: memtrace reads the frames of 3.10 to 3.13 only; stacks are "
		       "native only",
		       major, minor);
		return;
	}
	py.code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
	FIND(py.is_initialized, "Py_IsInitialized");
	FIND(py.is_finalizing, version >= 0x30d ? "Py_IsFinalizing" : "_Py_IsFinalizing");
	if (!py.code_type || !py.is_initialized)
		return;
	py.pages = map_table(SET_BITS);
	py.regions = map_table(REGION_BITS);
	py.codes = map_table(CODE_BITS);
	py.pystacks = map_table(PYSTACK_BITS);
	if (!py.pages || !py.regions || !py.codes || !py.pystacks) {
		mt_say("cannot map the tables for Python frames; stacks are native only");
		return;
	}
	py.l = l;
	{
		char byte;
		struct iovec local = {&byte, 1}, remote = {(void *)py.code_type, 1};
		if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != 1) {
			mt_say("process_vm_readv is refused here (%s): Python frames cannot be "
			       "read "
			       "safely; stacks are native only",
			       strerror(errno));
			return;
		}
	}
	if (version == 0x30d && !debug_offsets_agree(l)) {
		mt_say("this Python 3.13 is not the default build (its _Py_DebugOffsets differ); "
		       "stacks are native only");
		return;
	}
	mt_python_on = true;
}

void mt_python_after_fork(void)
{
	void *codes, *stacks;

	if (!mt_python_on)
		return;
	/* a new instance: its ids and PYCODE and PYSTACK records start afresh; new
	 * mappings rather than a memset, which would make every page private */
	codes = map_table(CODE_BITS);
	stacks = map_table(PYSTACK_BITS);
	if (!codes || !stacks) {
		mt_python_on = false;
		return;
	}
	mt_own_unmap((void *)py.codes, sizeof(uint64_t) << CODE_BITS);
	mt_own_unmap((void *)py.pystacks, sizeof(uint64_t) << PYSTACK_BITS);
	py.codes = codes;
	py.pystacks = stacks;
	atomic_store(&py.codes_used, 0);
	atomic_store(&py.pystacks_used, 0);
	if (mt_self.area) { /* the forking thread's caches of the parent's ids */
		memset(mt_self.area->py_codes, 0, sizeof(mt_self.area->py_codes));
		mt_self.area->py_last_key = 0;
	}
}
