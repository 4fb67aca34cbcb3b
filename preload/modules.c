/* SPDX-License-Identifier: MIT */
/*
 * The module map: every ELF object in the process (path, build-id, load bias,
 * PT_LOAD segments), written at start, in a forked child, and whenever a new
 * stack is met after the loader's counts of loaded and unloaded objects
 * changed. That catches objects loaded by any means (dlopen, libc's own
 * dlopen of NSS or iconv modules) before a stack can point into them.
 *
 * Context: init, fork child, slow path. Rescans are serialized with a
 * try-lock: a thread that finds another scanning goes on without waiting,
 * so no lock order with the loader's own locks can arise.
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mt.h"

uint32_t mt_module_gen;

struct known {
	uintptr_t base;
	uint64_t name_hash;
	bool seen;
};

#define MAX_KNOWN 8192
static struct known *known; /* mmap'd: MAX_KNOWN entries */
static unsigned nknown;
static unsigned long long last_adds, last_subs;
static _Atomic bool scanning;
uintptr_t mt_self_lo, mt_self_hi;

struct range_query {
	uintptr_t addr, lo, hi;
};

static int find_range(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct range_query *q = arg;

	(void)size;
	for (int k = 0; k < info->dlpi_phnum; k++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && q->addr >= lo &&
		    q->addr < lo + ph->p_memsz) {
			q->lo = lo;
			q->hi = lo + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

bool mt_module_range(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	struct range_query q = {addr, 0, 0};

	dl_iterate_phdr(find_range, &q);
	*lo = q.lo;
	*hi = q.hi;
	return q.hi != 0;
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603u;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211u;
	return h;
}

static size_t build_id(const struct dl_phdr_info *info, const uint8_t **out)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		size_t align = ph->p_align == 8 ? 8 : 4;
		const uint8_t *p, *end;

		if (ph->p_type != PT_NOTE)
			continue;
		p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const uint8_t *name = p + sizeof(*nh);
			const uint8_t *desc = name + ((nh->n_namesz + align - 1) & ~(align - 1));
			const uint8_t *next = desc + ((nh->n_descsz + align - 1) & ~(align - 1));
			if (next > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4) && nh->n_descsz <= MT_MAX_BUILD_ID) {
				*out = desc;
				return nh->n_descsz;
			}
			p = next;
		}
	}
	return 0;
}

static void write_module(const struct dl_phdr_info *info, const char *name)
{
	const uint8_t *id = NULL;
	size_t id_len = build_id(info, &id);
	size_t name_len = strnlen(name, MT_MAX_STRING);
	uint8_t *rec, *q;
	unsigned nseg = 0;

	rec = mt_room(64 + name_len + id_len + MT_MAX_SEGMENTS * 3 * MT_MAX_VARINT);
	if (!rec)
		return;
	q = mt_put_time(rec + 4, mt_now());
	q = mt_put_varint(q, info->dlpi_addr);
	q = mt_put_bytes(q, name, name_len);
	q = mt_put_bytes(q, id, id_len);
	for (int i = 0; i < info->dlpi_phnum; i++)
		nseg += info->dlpi_phdr[i].p_type == PT_LOAD;
	if (nseg > MT_MAX_SEGMENTS)
		nseg = MT_MAX_SEGMENTS;
	q = mt_put_varint(q, nseg);
	for (int i = 0, k = 0; i < info->dlpi_phnum && k < (int)nseg; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		q = mt_put_varint(q, ph->p_vaddr);
		q = mt_put_varint(q, ph->p_memsz);
		q = mt_put_varint(q, ph->p_flags);
		k++;
	}
	mt_commit_large(rec, MT_REC_MODULE, q);
}

static const char *module_name(const struct dl_phdr_info *info, bool first)
{
	static char exe[4096];

	if (info->dlpi_name && info->dlpi_name[0])
		return info->dlpi_name;
	if (!first)
		return "";
	if (!exe[0]) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = 0;
	}
	return exe;
}

struct scan {
	bool first;
};

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan *s = arg;
	const char *name = module_name(info, s->first);
	uint64_t h = name_hash(name);
	unsigned i;

	(void)size;
	s->first = false;
	for (i = 0; i < nknown; i++) {
		if (known[i].base == info->dlpi_addr && known[i].name_hash == h) {
			known[i].seen = true;
			return 0;
		}
	}
	if (nknown < MAX_KNOWN)
		known[nknown++] = (struct known){info->dlpi_addr, h, true};
	write_module(info, name);
	return 0;
}

static void rescan(void)
{
	struct scan s = {.first = true};
	unsigned i, kept = 0;
	bool gone = false;

	for (i = 0; i < nknown; i++)
		known[i].seen = false;
	dl_iterate_phdr(scan_one, &s);
	for (i = 0; i < nknown; i++) {
		if (known[i].seen) {
			known[kept++] = known[i];
			continue;
		}
		uint8_t *rec = mt_room(4 + 3 * MT_MAX_VARINT);
		gone = true;
		if (!rec)
			continue;
		uint8_t *q = mt_put_time(rec + 2, mt_now());
		q = mt_put_varint(q, known[i].base);
		q = mt_put_varint(q, mt_module_gen + 1);
		mt_commit_small(rec, MT_REC_MODULE_GONE, q);
	}
	nknown = kept;
	if (gone) {
		mt_module_gen++;
		mt_unwind_forget();
	}
}

struct counts {
	unsigned long long adds, subs;
};

static int peek(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct counts *c = arg;

	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		c->adds = info->dlpi_adds;
		c->subs = info->dlpi_subs;
	}
	return 1;
}

void mt_modules_check(void)
{
	struct counts c = {0, 0};

	if (!known)
		return;
	if (MT_UNLIKELY(mt_python_pending))
		mt_python_detect();
	dl_iterate_phdr(peek, &c);
	if (c.adds == last_adds && c.subs == last_subs)
		return;
	if (atomic_exchange(&scanning, true))
		return; /* another thread is at it */
	rescan();
	last_adds = c.adds;
	last_subs = c.subs;
	atomic_store(&scanning, false);
	if (!mt_python_on)
		mt_python_detect(); /* a dlopen may have brought an interpreter */
}

void mt_modules_init(void)
{
	void *p = mt_own_map(MAX_KNOWN * sizeof(struct known));

	if (p == MAP_FAILED) {
		mt_writer_stop("cannot map the module table", ENOMEM);
		return;
	}
	known = p;
	mt_module_range((uintptr_t)&mt_modules_init, &mt_self_lo, &mt_self_hi);
	last_adds = last_subs = ~0ull;
	mt_modules_check();
}

/* Fork child: same address space, but a new instance: describe it all again. */
void mt_modules_after_fork(void)
{
	atomic_store(&scanning, false);
	nknown = 0;
	last_adds = last_subs = ~0ull;
	mt_modules_check();
}
