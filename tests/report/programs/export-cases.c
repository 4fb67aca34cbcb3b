/* SPDX-License-Identifier: MIT */
/*
 * Known figures for memtrace diff and export (tests/report): `export-cases
 * TABLE LOST`, each block from a function of its own so that each is a
 * stack of its own:
 *
 *   keep_cache   100 B held by a global: reachable at exit
 *   scratch      4096 B allocated and freed, 8 times: never live at the peak
 *   lose_block   LOST B whose only pointer is dropped: a definite leak (none for 0)
 *   load_table   TABLE B, live from the mark "loaded" to the mark "done": the
 *                peak is 100 + LOST + TABLE
 *
 * Between the marks it sleeps 60 ms (RSS samples with the table live) and
 * asks for SIZE_MAX / 2 bytes, which fails. Built twice (tests/report/meson.build),
 * the second time with SHIFT: code added above everything and the lines
 * numbered from 500 there, so that no address or line of the functions is
 * the same in both builds.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SHIFT
/* A function of its own before the others moves their code. */
__attribute__((noinline)) static int shift_code(int x)
{
	volatile int y = x;

	for (int i = 0; i < 10; i++)
		y = y * 3 + i;
	return y;
}
/* and the lines below are numbered as if lines had been added above them */
#line 500
#endif

void *volatile cache;

static void mark(const char *label)
{
	void (*fn)(const char *);

	*(void **)&fn =
	        dlsym(RTLD_DEFAULT, "memtrace_mark"); /* POSIX's way to a function pointer */
	if (fn)
		fn(label);
}

__attribute__((noinline)) static void keep_cache(void)
{
	cache = malloc(100);
	memset(cache, 1, 100);
}

__attribute__((noinline)) static void scratch(void)
{
	char *volatile p = malloc(4096);

	memset(p, 2, 4096);
	free(p);
}

__attribute__((noinline)) static void lose_block(size_t n)
{
	void *volatile p = n ? malloc(n) : NULL;

	if (p)
		memset(p, 3, n);
	p = NULL;
}

__attribute__((noinline)) static char *load_table(size_t n)
{
	char *t = malloc(n);

	memset(t, 4, n);
	return t;
}

/* Overwrites the stack the calls above used, so that no dead slot holds their pointers. */
__attribute__((noinline)) static void scrub_stack(void)
{
	volatile char junk[4096];

	memset((char *)junk, 0, sizeof(junk));
}

int main(int argc, char **argv)
{
	size_t table = argc > 1 ? strtoul(argv[1], NULL, 10) : 1 << 20;
	size_t lost = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;
	struct timespec pause = {0, 60 * 1000 * 1000};
	void *volatile huge;
	char *t;

#ifdef SHIFT
	if (shift_code(argc) == 42)
		return 2;
#endif
	mark("start");
	keep_cache();
	for (int i = 0; i < 8; i++)
		scratch();
	lose_block(lost);
	t = load_table(table);
	mark("loaded");
	nanosleep(&pause, NULL);
	huge = malloc(SIZE_MAX / 2);
	free(t);
	mark("done");
	scrub_stack();
	return huge == NULL ? 0 : 1;
}
