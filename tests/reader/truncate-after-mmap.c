/* SPDX-License-Identifier: MIT */
/*
 * An LD_PRELOAD shim for test-io.py: the first read-only file mapping the
 * program makes has its file cut to MEMTRACE_TEST_TRUNCATE bytes right
 * after mmap returns, as if another process truncated the trace while
 * memtrace read it. Reading the mapping past the new end raises SIGBUS, at
 * a known place rather than by a race.
 *
 * May not: be installed; it is a test fixture.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	static void *(*real)(void *, size_t, int, int, int, off_t);
	static int done;
	const char *size = getenv("MEMTRACE_TEST_TRUNCATE");
	char link[64], path[PATH_MAX];
	void *p;
	ssize_t n;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "mmap"); /* POSIX's way past ISO C's rule */
	p = real(addr, len, prot, flags, fd, off);
	if (p == MAP_FAILED || fd < 0 || prot != PROT_READ || done || !size)
		return p;
	done = 1;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n > 0) {
		path[n] = 0;
		if (truncate(path, strtoll(size, NULL, 10)) != 0)
			abort();
	}
	return p;
}
