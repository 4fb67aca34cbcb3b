/* SPDX-License-Identifier: MIT */
/*
 * Allocates COUNT blocks of SIZE bytes (default 48 of 1 MiB + 1, each served
 * by its own mmap in glibc), keeps them all, and prints how many it got and
 * the process's VmPeak in KiB. Run under a small RLIMIT_AS: whatever the
 * tracer reserves for itself comes out of the same address space.
 * Usage: address-space [COUNT [SIZE]]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *blocks[4096];

static __attribute__((noinline)) void *grab(size_t size)
{
	return malloc(size);
}

/* VmPeak from /proc/self/status, read without the heap. */
static long vm_peak_kb(void)
{
	static char buf[8192];
	int f = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = f < 0 ? -1 : read(f, buf, sizeof(buf) - 1);
	const char *p;

	if (f >= 0)
		close(f);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "VmPeak:");
	return p ? strtol(p + 7, NULL, 10) : -1;
}

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 48;
	size_t size = argc > 2 ? strtoul(argv[2], NULL, 10) : (1u << 20) + 1;
	int got = 0;

	if (count < 0 || count > 4096)
		return 2;
	for (int i = 0; i < count; i++) {
		blocks[i] = grab(size);
		if (blocks[i]) {
			((char *)blocks[i])[0] = 1;
			got++;
		}
	}
	/* not printf: stdout's buffer would be one more failed allocation */
	static char line[128];
	int n = snprintf(line, sizeof(line), "allocated %d of %d vmpeak_kb %ld\n", got, count,
	                 vm_peak_kb());
	return write(1, line, (size_t)n) == n ? 0 : 1;
}
