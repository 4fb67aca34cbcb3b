/* SPDX-License-Identifier: MIT */
/*
 * What dlsym and dlvsym answer, printed for test-dlsym.py to hold against
 * the same program without the preload: RTLD_NEXT from a library (next-a
 * asks for the next next_probe: next-b's, whoever answers), RTLD_DEFAULT,
 * and libc's malloc by a handle, which must be the malloc the program
 * calls (memtrace's under the preload, libc's without). Then it leaks
 * 3,000,017 bytes through that handle's malloc, which a trace must show.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

char probe_after_a(void);
int b_loaded(void);

int main(void)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW);
	void *(*by_handle)(size_t), *(*by_version)(size_t), *(*by_default)(size_t);
	void *p;

	if (!libc || !b_loaded())
		return 1;
	*(void **)&by_handle = dlsym(libc, "malloc");
	*(void **)&by_version = dlvsym(libc, "malloc", "GLIBC_2.2.5");
	*(void **)&by_default = dlsym(RTLD_DEFAULT, "malloc");
	printf("next %c\n", probe_after_a());
	printf("handle %s\n", by_handle == by_default ? "default" : "other");
	printf("version %s\n", by_version == by_default ? "default" : "other");
	printf("missing %s\n", dlsym(libc, "no_such_symbol_here") ? "found" : "null");
	p = by_handle(3000017);
	printf("leak %s\n", p ? "made" : "failed");
	fflush(stdout);
	_exit(0);
}
