/* SPDX-License-Identifier: MIT */
/*
 * dlsym and dlvsym, interposed. A program that looks an allocation function
 * up by a handle (`ctypes.CDLL("libc.so.6").malloc`, a plugin host that
 * dlopens libc) gets libc's own malloc, past the preload, and its memory
 * goes unseen: a 100 MiB leak was invisible that way. A look-up by a handle
 * whose answer is one of libc's allocation functions gets memtrace's
 * instead, which calls libc's: the same function, traced.
 *
 * RTLD_NEXT and RTLD_DEFAULT answers depend on the object that calls: libc
 * takes it from the return address. Those calls jump to libc's dlsym with
 * the caller's return address untouched (the x86-64 entry below), so the
 * program gets exactly what it would without memtrace; memtrace's own
 * RTLD_NEXT look-ups (real.c) keep meaning "after libmemtrace". libc's
 * dlsym and dlvsym are found in libc's own dynamic symbol table, by its
 * GNU hash: a dlsym call would come back here.
 *
 * Context: any thread, any time, also before init.
 * May not: allocate (libc's dlsym may, for its error string).
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mt.h"

#if defined(__x86_64__)

MT_HIDDEN void *(*mt_libc_dlsym)(void *, const char *);
MT_HIDDEN void *(*mt_libc_dlvsym)(void *, const char *, const char *);
/* Called from the entries at the end of this file only. */
MT_HIDDEN void *mt_dlsym_resolve(void);
MT_HIDDEN void *mt_dlsym_handle(void *handle, const char *name);
MT_HIDDEN void *mt_dlvsym_handle(void *handle, const char *name, const char *version);

/* A function's address as data: ISO C has no such cast; POSIX makes the copy work. */
static void *as_data(void (*f)(void))
{
	void *d;

	__builtin_memcpy(&d, &f, sizeof(d));
	return d;
}
#define AS_DATA(fn) as_data((void (*)(void))(fn))

struct lookup {
	const char *name;
	void *found;
};

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (uint8_t)*s;
	return h;
}

/* A dynamic entry's address: the loader relocated it in place, except where it could not. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
	return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

/*
 * dl_iterate_phdr: the symbol q->name defined in libc.so.6 (glibc 2.34 and
 * later) or libdl.so.2 (before), by the object's GNU hash table.
 */
static int find_in_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lookup *q = arg;
	const char *slash = strrchr(info->dlpi_name, '/');
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const uint32_t *gh = NULL;

	const char *base = slash ? slash + 1 : info->dlpi_name;

	(void)size;
	if (strcmp(base, "libc.so.6") != 0 && strcmp(base, "libdl.so.2") != 0)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			symtab = (const ElfW(Sym) *)dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRTAB)
			strtab = (const char *)dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_GNU_HASH)
			gh = (const uint32_t *)dyn_ptr(info, dyn->d_un.d_ptr);
	}
	if (!symtab || !strtab || !gh)
		return 0;
	{
		uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
		const uint32_t *buckets = gh + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
		const uint32_t *chain = buckets + nbuckets;
		uint32_t h = gnu_hash(q->name), i = buckets[h % nbuckets];

		for (; i >= symoffset; i++) {
			const ElfW(Sym) *sym = &symtab[i];
			if ((chain[i - symoffset] | 1) == (h | 1) && sym->st_value &&
			    strcmp(strtab + sym->st_name, q->name) == 0) {
				q->found = (void *)(info->dlpi_addr + sym->st_value);
				break;
			}
			if (chain[i - symoffset] & 1)
				break;
		}
	}
	return q->found != NULL;
}

static void *libc_symbol(const char *name)
{
	struct lookup q = {name, NULL};

	dl_iterate_phdr(find_in_libc, &q);
	return q.found;
}

/* libc's dlsym, found once; the entry below calls it with the registers it was given. */
MT_HIDDEN void *mt_dlsym_resolve(void)
{
	void *p;

	if (!mt_libc_dlsym) {
		p = libc_symbol("dlvsym");
		__builtin_memcpy(&mt_libc_dlvsym, &p, sizeof(p));
		p = libc_symbol("dlsym");
		__builtin_memcpy(&mt_libc_dlsym, &p, sizeof(p));
	}
	return AS_DATA(mt_libc_dlsym);
}

/* What the program gets for p, libc's answer: memtrace's function for one of libc's. */
static void *traced(void *p)
{
	if (!p || !mt_malloc_is_ours())
		return p;
	mt_real_resolve();
#define SWAP(field, ours)                                                                          \
	if (p == AS_DATA(mt_real.field))                                                           \
		return AS_DATA(ours);
	SWAP(malloc, malloc)
	SWAP(free, free)
	SWAP(calloc, calloc)
	SWAP(realloc, realloc)
	SWAP(reallocarray, reallocarray)
	SWAP(posix_memalign, posix_memalign)
	SWAP(aligned_alloc, aligned_alloc)
	SWAP(memalign, memalign)
	SWAP(valloc, valloc)
	SWAP(pvalloc, pvalloc)
	SWAP(mmap, mmap)
	SWAP(mmap64, mmap64)
	SWAP(munmap, munmap)
	SWAP(mremap, mremap)
#undef SWAP
	return p;
}

/* dlsym with a handle of the program's: libc's answer, traced. */
MT_HIDDEN void *mt_dlsym_handle(void *handle, const char *name)
{
	mt_dlsym_resolve();
	return mt_libc_dlsym ? traced(mt_libc_dlsym(handle, name)) : NULL;
}

MT_HIDDEN void *mt_dlvsym_handle(void *handle, const char *name, const char *version)
{
	mt_dlsym_resolve();
	return mt_libc_dlvsym ? traced(mt_libc_dlvsym(handle, name, version)) : NULL;
}

/*
 * The entries. RTLD_NEXT is (void *)-1 and RTLD_DEFAULT 0: those go to
 * libc's function by a jump, so its return address is still the caller's;
 * any other handle goes to the C function above. Until libc's functions are
 * known, mt_dlsym_resolve finds them first, the argument registers kept
 * around the call (and the stack 16-byte aligned for it).
 */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "	cmpq $-1, %rdi\n"
        "	je 1f\n"
        "	testq %rdi, %rdi\n"
        "	jne mt_dlsym_handle\n"
        "1:	movq mt_libc_dlsym(%rip), %rax\n"
        "	testq %rax, %rax\n"
        "	jz 2f\n"
        "	jmp *%rax\n"
        "2:	pushq %rdi\n"
        "	pushq %rsi\n"
        "	subq $8, %rsp\n"
        "	call mt_dlsym_resolve\n"
        "	addq $8, %rsp\n"
        "	popq %rsi\n"
        "	popq %rdi\n"
        "	testq %rax, %rax\n"
        "	jz 3f\n"
        "	jmp *%rax\n"
        "3:	ret\n"
        ".size dlsym, .-dlsym\n"
        ".globl dlvsym\n"
        ".type dlvsym, @function\n"
        "dlvsym:\n"
        "	cmpq $-1, %rdi\n"
        "	je 1f\n"
        "	testq %rdi, %rdi\n"
        "	jne mt_dlvsym_handle\n"
        "1:	movq mt_libc_dlvsym(%rip), %rax\n"
        "	testq %rax, %rax\n"
        "	jz 2f\n"
        "	jmp *%rax\n"
        "2:	pushq %rdi\n"
        "	pushq %rsi\n"
        "	pushq %rdx\n"
        "	call mt_dlsym_resolve\n"
        "	popq %rdx\n"
        "	popq %rsi\n"
        "	popq %rdi\n"
        "	movq mt_libc_dlvsym(%rip), %rax\n"
        "	testq %rax, %rax\n"
        "	jz 3f\n"
        "	jmp *%rax\n"
        "3:	ret\n"
        ".size dlvsym, .-dlvsym\n");

#endif
