/* SPDX-License-Identifier: MIT */
/*
 * Allocations under every kind of frame the stack walker meets: frames with
 * and without a frame pointer, frames sized at run time (alloca: the CFA is
 * rbp-based), a frame of 64 KiB (larger than the walker's rule cache holds:
 * libunwind steps it), recursion, a signal handler (a signal frame: libunwind
 * steps it), a callback through libc (qsort), and recursion deeper than the
 * 64 frames kept, allocating on the way down and back up (the walker's
 * reuse of a cut walk, inward and outward). Deterministic: the same
 * stacks every run, so the walker's stacks can be compared with libunwind's.
 */
#include <alloca.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

#define NOINLINE __attribute__((noinline))

static NOINLINE void grab(size_t n)
{
	sink = malloc(n);
	free(sink);
}

static NOINLINE __attribute__((optimize("omit-frame-pointer"))) void no_fp(int d)
{
	if (d)
		no_fp(d - 1);
	else
		grab(16);
	__asm__ volatile("");
}

static NOINLINE __attribute__((optimize("no-omit-frame-pointer"))) void with_fp(int d)
{
	if (d)
		with_fp(d - 1);
	else
		grab(32);
	__asm__ volatile("");
}

static NOINLINE void dynamic_frame(size_t n)
{
	char *buf = alloca(n);
	memset(buf, 0, n);
	grab(48 + (size_t)buf[n - 1]);
	__asm__ volatile("" ::"r"(buf));
}

static NOINLINE void huge_frame(void)
{
	volatile char big[65536];
	big[0] = 1;
	grab(64 + (size_t)big[0]);
}

static NOINLINE void deep(int n)
{
	if (n % 9 == 0)
		grab(112 + (size_t)n);
	if (n > 0)
		deep(n - 1);
	if (n % 7 == 0)
		grab(128 + (size_t)n);
	__asm__ volatile("");
}

static int compare(const void *a, const void *b)
{
	grab(80);
	return *(const int *)a - *(const int *)b;
}

static void on_signal(int sig)
{
	(void)sig;
	grab(96);
}

int main(void)
{
	int v[8] = { 5, 3, 7, 1, 8, 2, 6, 4 };

	for (int round = 0; round < 3; round++) {
		for (int d = 0; d < 6; d++) {
			no_fp(d);
			with_fp(d);
			dynamic_frame(64 + (size_t)d * 1000);
		}
		huge_frame();
		deep(100 + round * 13);
		qsort(v, 8, sizeof(int), compare);
		signal(SIGUSR1, on_signal);
		raise(SIGUSR1);
	}
	return 0;
}
