/* SPDX-License-Identifier: MIT */
/*
 * Does the program use this library's malloc? The dynamic linker binds
 * every call to malloc to the first object of the global scope that defines
 * it: the executable, then the preloaded libraries in order. A program that
 * brings its own allocator in its executable (or preloads one before
 * memtrace) never calls the hooks; memtrace then stays out of its way
 * entirely. The question is answered by reading the dynamic symbol tables
 * of the objects ahead of this one, without calling malloc: a probe
 * allocation would itself change such a program's heap.
 *
 * (Comparing dlsym(RTLD_DEFAULT, "malloc") with our address does not work:
 * in a non-PIE program that takes malloc's address, the answer is the
 * executable's PLT stub.)
 *
 * Context: init.
 */
#include <elf.h>
#include <link.h>
#include <string.h>

#include "mt.h"

struct search {
	uintptr_t self; /* an address inside this library */
	bool found_self;
	bool defined_before;
};

static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
	/* glibc relocates most pointers of a writable .dynamic in place */
	return v >= info->dlpi_addr ? v : info->dlpi_addr + v;
}

static bool contains(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && addr >= lo && addr < lo + ph->p_memsz)
			return true;
	}
	return false;
}

/* Looks "malloc" up with the object's DT_GNU_HASH table. */
static bool defines_malloc(const struct dl_phdr_info *info)
{
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const uint32_t *gnu = NULL;

	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return false;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			symtab = (const ElfW(Sym) *)dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRTAB)
			strtab = (const char *)dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_GNU_HASH)
			gnu = (const uint32_t *)dyn_ptr(info, dyn->d_un.d_ptr);
	}
	if (!symtab || !strtab || !gnu)
		return false; /* no GNU hash: not produced by any current toolchain */

	uint32_t h = 5381;
	for (const char *c = "malloc"; *c; c++)
		h = h * 33 + (uint8_t)*c;
	uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gnu + 4);
	const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t i = nbuckets ? buckets[h % nbuckets] : 0;

	if (i < symoffset)
		return false;
	for (;; i++) {
		uint32_t ch = chain[i - symoffset];
		const ElfW(Sym) *sym = &symtab[i];
		if ((ch | 1) == (h | 1) && !strcmp(strtab + sym->st_name, "malloc") &&
		    sym->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym->st_info) == STT_FUNC)
			return true;
		if (ch & 1)
			return false;
	}
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct search *s = arg;

	(void)size;
	if (contains(info, s->self)) {
		s->found_self = true;
		return 1;
	}
	if (defines_malloc(info))
		s->defined_before = true;
	return 0;
}

bool mt_malloc_is_ours(void)
{
	struct search s = {(uintptr_t)&mt_malloc_is_ours, false, false};

	dl_iterate_phdr(visit, &s);
	return s.found_self && !s.defined_before;
}
