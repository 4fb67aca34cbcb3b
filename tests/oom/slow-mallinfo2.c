/* SPDX-License-Identifier: MIT */
/*
 * An LD_PRELOAD shim for test-heap-fragmentation.py, loaded before the
 * preload: every mallinfo2 call made off the main thread (memtrace's
 * sampler) costs 2 ms of CPU, as a heap of a hundred thousand free chunks
 * does, and is then held 1 ms off the CPU, as a walk that a preemption or
 * the hypervisor interrupted is: the sampler can never take figures it
 * trusts. It counts those calls, and the CPU they took, in the file named
 * by SLOW_MALLINFO2_OUT at exit: the test bounds what the sampler spends.
 *
 * May not: be installed; it is a test fixture.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define BURN_NS 2000000L
#define HOLD_NS 1000000L

static atomic_uint calls;

static long long thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct mallinfo2 mallinfo2(void)
{
	static struct mallinfo2 (*real)(void);
	struct timespec hold = {0, HOLD_NS};
	struct mallinfo2 mi;
	long long start;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "mallinfo2"); /* POSIX's way past ISO C's rule */
	mi = real();
	if (gettid() != getpid()) {
		atomic_fetch_add(&calls, 1);
		for (start = thread_cpu_ns(); thread_cpu_ns() - start < BURN_NS;)
			;
		nanosleep(&hold, NULL);
	}
	return mi;
}

__attribute__((destructor)) static void report(void)
{
	const char *path = getenv("SLOW_MALLINFO2_OUT");
	char line[64];
	int fd, n;

	if (!path || (fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return;
	/* no stdio: nothing allocated at the exit of a traced program */
	n = snprintf(line, sizeof(line), "%u %ld\n", atomic_load(&calls), BURN_NS);
	if (write(fd, line, (size_t)n) != n)
		fd = -fd; /* the test then reads no count, and fails */
	close(fd < 0 ? -fd : fd);
}
