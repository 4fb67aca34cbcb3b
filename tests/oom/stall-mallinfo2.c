/* SPDX-License-Identifier: MIT */
/*
 * An LD_PRELOAD shim for test-heap-fragmentation.py, loaded before the
 * preload: every other mallinfo2 call made off the main thread (memtrace's
 * sampler, taking the heap figures itself while the program computes) is
 * held 50 ms before glibc's runs, as a sampler thread preempted on a busy
 * machine is. The program's own thread goes on allocating and freeing in
 * that time, at a known place rather than by a race; glibc then reports the
 * heap as it is after those calls.
 *
 * May not: be installed; it is a test fixture.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

struct mallinfo2 mallinfo2(void)
{
	static struct mallinfo2 (*real)(void);
	static atomic_uint calls;
	struct timespec stall = {0, 50 * 1000 * 1000};

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "mallinfo2"); /* POSIX's way past ISO C's rule */
	if (gettid() != getpid() && atomic_fetch_add(&calls, 1) % 2 == 0)
		nanosleep(&stall, NULL);
	return real();
}
