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
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>

#include "../shims/burn.h"

#define BURN_NS 2000000L
#define HOLD_NS 1000000L

static atomic_uint calls;

struct mallinfo2 mallinfo2(void)
{
	static struct mallinfo2 (*real)(void);
	struct timespec hold = {0, HOLD_NS};
	struct mallinfo2 mi;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "mallinfo2"); /* POSIX's way past ISO C's rule */
	mi = real();
	if (gettid() != getpid()) {
		atomic_fetch_add(&calls, 1);
		burn(BURN_NS);
		nanosleep(&hold, NULL);
	}
	return mi;
}

__attribute__((destructor)) static void report(void)
{
	char line[64];

	snprintf(line, sizeof(line), "%u %ld\n", atomic_load(&calls), BURN_NS);
	report_to("SLOW_MALLINFO2_OUT", line);
}
