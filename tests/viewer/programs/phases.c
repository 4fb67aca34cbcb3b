/* SPDX-License-Identifier: MIT */
/*
 * Three phases whose live sets are known to the byte, for the viewer's
 * test of a click on the timeline: phase A holds keep_a's 3 MiB, phase B
 * also keep_b's 5 MiB, phase C only keep_b's, each for 300 ms with no
 * allocation in between; each phase starts with a mark. Then a malloc that
 * must fail (a failed allocation on the timeline), and everything is freed.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB ((size_t)1 << 20)

static void mark(const char *label)
{
	void (*fn)(const char *);

	*(void **)&fn =
	        dlsym(RTLD_DEFAULT, "memtrace_mark"); /* POSIX's way to a function pointer */
	if (fn)
		fn(label);
}

static void pause_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&t, NULL);
}

__attribute__((noinline)) static char *keep_a(void)
{
	return malloc(3 * MIB);
}

__attribute__((noinline)) static char *keep_b(void)
{
	return malloc(5 * MIB);
}

int main(void)
{
	char *a, *b;
	void *volatile huge;

	mark("phase A");
	a = keep_a();
	pause_ms(300);
	mark("phase B");
	b = keep_b();
	pause_ms(300);
	mark("phase C");
	free(a);
	pause_ms(300);
	huge = malloc(SIZE_MAX / 2);
	free(huge);
	free(b);
	return huge != NULL;
}
