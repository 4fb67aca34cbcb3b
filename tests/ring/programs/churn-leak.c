/* SPDX-License-Identifier: MIT */
/*
 * A long run in miniature, the same every time: N allocations of 16 to 215
 * bytes, each filled and read back, 64 of them live at once, and one in
 * every 1000 (of 1 to 2 KiB) kept for ever from its own stack: a slow,
 * steady leak. argv: N, and optionally a byte
 * count to allocate and keep at the end, in 1 MiB blocks, until malloc fails or the process is
 * killed (the OOM-killer test). CHURN_STACKS=B first makes 2^B distinct stacks, a
 * malloc and free at the end of each path of B calls to left or right: a start-up
 * that leaves the definitions a library import leaves (torch: some 700,000 stacks,
 * 135 MB), which the ring keeps for as long as the process lives.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

/* The preload's, when traced (a MARK record, which the ring's consumer reads past). */
extern int memtrace_mark(const char *label) __attribute__((weak));

__attribute__((noinline)) static void *leak(size_t size)
{
	void *p = malloc(size);

	sink = p;
	return p;
}

/* A block used as a program uses one: filled and read back (what paces the run). */
static int work = 1;

__attribute__((noinline)) static void *churn(size_t size)
{
	unsigned char *p = malloc(size);
	unsigned sum = 0;

	for (int w = 0; w < work; w++) {
		memset(p, (int)size + w, size);
		for (size_t i = 0; i < size; i++)
			sum += p[i] * (unsigned)i;
	}
	sink = (void *)(uintptr_t)sum;
	return p;
}

static unsigned branch(unsigned depth, unsigned path);

/* Two callers of branch: a path's bits choose the return addresses of its stack. */
__attribute__((noinline)) static unsigned left(unsigned depth, unsigned path)
{
	return branch(depth, path) + 1; /* not a tail call: the frame stays */
}

__attribute__((noinline)) static unsigned right(unsigned depth, unsigned path)
{
	return branch(depth, path) + 2;
}

__attribute__((noinline)) static unsigned branch(unsigned depth, unsigned path)
{
	void *p;

	if (depth)
		return (path & 1 ? right : left)(depth - 1, path >> 1) + 1;
	p = malloc(16);
	sink = p;
	free(p);
	return 0;
}

__attribute__((noinline)) static void hold_until_killed(long long bytes, int fd)
{
	unsigned held = 0;

	for (long long got = 0; bytes < 0 || got < bytes; got += 1 << 20) {
		char *p = malloc(1 << 20);
		if (!p)
			break;
		memset(p, 1, 1 << 20); /* touched: the cgroup counts it */
		sink = p;
		held++;
		if (fd >= 0 && write(fd, &held, sizeof(held)) < 0) {
			/* no one listens */
		}
	}
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	const char *cgroup = getenv("CHURN_CGROUP");
	void *live[64] = {0};

	if (memtrace_mark)
		memtrace_mark("start");
	if (getenv("CHURN_WORK"))
		work = atoi(getenv("CHURN_WORK"));
	if (getenv("CHURN_STACKS"))
		for (unsigned bits = (unsigned)atoi(getenv("CHURN_STACKS")), path = 0;
		     path < 1u << bits; path++)
			sink = (void *)(uintptr_t)branch(bits, path);
	if (cgroup) {
		FILE *f = fopen(cgroup, "w");
		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0)
			return 2;
	}

	for (long i = 0; i < n; i++) {
		size_t size = 16 + (size_t)(i * 7919 % 200);
		if (i % 1000 == 0) {
			leak(1024 + (size_t)(i / 1000 * 37 % 1024));
			continue;
		}
		free(live[i % 64]);
		live[i % 64] = churn(size);
	}
	for (int i = 0; i < 64; i++)
		free(live[i]);
	if (argc > 2)
		hold_until_killed(atoll(argv[2]),
		                  getenv("CHURN_FD") ? atoi(getenv("CHURN_FD")) : -1);
	return 0;
}
