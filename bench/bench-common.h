/* SPDX-License-Identifier: MIT */
/*
 * Helpers every bench-* workload shares: a deterministic PRNG, the count from
 * argv, a barrier that keeps the compiler from deleting allocations, and the
 * optional self-report of the process's own rusage.
 *
 * May not: allocate. The only allocator calls a workload makes are the ones
 * it counts (plus stdio's one buffer for the final line), so its printed
 * call count is the number of events a tracer should record.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

/*
 * noipa, not just noinline: GCC's IPA passes could otherwise clone a function
 * per constant argument or merge identical bodies, and the call stacks the
 * workloads build would then not be the ones the source shows.
 */
#if defined(__clang__)
#define BENCH_NOIPA __attribute__((noinline))
#else
#define BENCH_NOIPA __attribute__((noipa))
#endif

/* splitmix64: tiny, fast, and the same sequence on every machine. */
static inline uint64_t bench_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15u);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

/*
 * Makes the block's contents "used" as far as the compiler knows: without it,
 * GCC may remove a malloc/free pair whose block is only written and read
 * locally, and the workload would measure nothing.
 */
static inline void bench_escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

/* argv[1] as a positive count, or the default; a bad argument is an error. */
static inline uint64_t bench_count(int argc, char **argv, uint64_t fallback)
{
	char *end;
	unsigned long long v;

	if (argc < 2)
		return fallback;
	errno = 0;
	v = strtoull(argv[1], &end, 10);
	if (errno || end == argv[1] || *end || v == 0) {
		fprintf(stderr, "%s: expected a positive count, got '%s'\n", argv[0], argv[1]);
		exit(2);
	}
	return v;
}

/*
 * With BENCH_RUSAGE set, prints the process's own CPU time and peak RSS to
 * stderr. run-bench needs it under heaptrack, where the traced program is one
 * process among several (the heaptrack script, heaptrack_interpret, zstd) and
 * the tree's rusage alone cannot tell whose time is whose.
 */
static inline void bench_report_rusage(void)
{
	struct rusage ru;

	if (!getenv("BENCH_RUSAGE") || getrusage(RUSAGE_SELF, &ru))
		return;
	fprintf(stderr, "bench-rusage: utime_us=%lld stime_us=%lld maxrss_kb=%ld\n",
		(long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
		(long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
		ru.ru_maxrss);
}

#endif
