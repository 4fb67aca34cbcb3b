/* SPDX-License-Identifier: MIT */
/*
 * An LD_PRELOAD shim for test-pss-reads.py, loaded before the preload:
 * every read of smaps_rollup from its start (memtrace's: the program reads
 * none) costs 2 ms of CPU, as a process of a few hundred
 * megabytes does (torch's 455 MB: 7.9 ms). It counts those reads in the file
 * named by SLOW_SMAPS_OUT at exit: the test bounds how often the sampler
 * pays for them.
 *
 * May not: be installed; it is a test fixture.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>

#include "../../shims/burn.h"

#define BURN_NS 2000000L

static atomic_uint reads;

static int is_smaps_rollup(int fd)
{
	static const char tail[] = "/smaps_rollup";
	char link[64], path[256];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	return n >= (ssize_t)sizeof(tail) - 1 &&
	       !memcmp(path + n - (sizeof(tail) - 1), tail, sizeof(tail) - 1);
}

ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
	static ssize_t (*real)(int, void *, size_t, off_t);

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pread"); /* POSIX's way past ISO C's rule */
	if (offset == 0 && is_smaps_rollup(fd)) {
		atomic_fetch_add(&reads, 1);
		burn(BURN_NS);
	}
	return real(fd, buf, count, offset);
}

__attribute__((destructor)) static void report(void)
{
	char line[32];

	snprintf(line, sizeof(line), "%u\n", atomic_load(&reads));
	report_to("SLOW_SMAPS_OUT", line);
}
