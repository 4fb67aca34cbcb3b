/* SPDX-License-Identifier: MIT */
/*
 * The real functions behind the interposed ones, found with
 * dlsym(RTLD_NEXT). Context: the first interposed call of the process (init).
 * While the lookup runs, the hooks see NULL pointers and serve the calloc
 * that dlsym makes from the bootstrap arena.
 *
 * A function libc lacks stays NULL; its hook then fails the way a missing
 * function would (ENOSYS / NULL) rather than crash.
 */
#include <dlfcn.h>

#include "mt.h"

struct mt_real mt_real;

/* ISO C has no cast from object to function pointer; POSIX guarantees the copy works. */
#define LOOKUP(field, name)                                                                        \
	do {                                                                                       \
		void *sym = dlsym(RTLD_NEXT, name);                                                \
		__builtin_memcpy(&mt_real.field, &sym, sizeof(sym));                               \
	} while (0)

void mt_real_resolve(void)
{
	static _Atomic int once;
	int expected = 0;

	if (!atomic_compare_exchange_strong(&once, &expected, 1))
		return; /* another call (maybe dlsym's own calloc) is resolving */
	/* calloc first: dlsym needs it, and free must be known before anything is given back */
	LOOKUP(calloc, "calloc");
	LOOKUP(free, "free");
	LOOKUP(malloc, "malloc");
	LOOKUP(realloc, "realloc");
	LOOKUP(reallocarray, "reallocarray");
	LOOKUP(posix_memalign, "posix_memalign");
	LOOKUP(aligned_alloc, "aligned_alloc");
	LOOKUP(memalign, "memalign");
	LOOKUP(valloc, "valloc");
	LOOKUP(pvalloc, "pvalloc");
	LOOKUP(malloc_usable_size, "malloc_usable_size");
	LOOKUP(mmap, "mmap");
	LOOKUP(mmap64, "mmap64");
	LOOKUP(munmap, "munmap");
	LOOKUP(mremap, "mremap");
	LOOKUP(exit, "exit");
	LOOKUP(_exit, "_exit");
	LOOKUP(_Exit, "_Exit");
	LOOKUP(libc_start_main, "__libc_start_main");
	LOOKUP(execve, "execve");
	LOOKUP(execv, "execv");
	LOOKUP(execvp, "execvp");
	LOOKUP(execvpe, "execvpe");
	LOOKUP(fexecve, "fexecve");
	LOOKUP(execveat, "execveat");
	LOOKUP(close, "close");
	LOOKUP(close_range, "close_range");
	LOOKUP(closefrom, "closefrom");
	LOOKUP(dup2, "dup2");
	LOOKUP(dup3, "dup3");
}
