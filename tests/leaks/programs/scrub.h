/* SPDX-License-Identifier: MIT */
/*
 * The known-truth programs drop pointers on purpose. A dropped pointer must
 * be gone from memory, or the block it named is still reachable through a
 * stale stack slot: memtrace scans every word of a live thread's stack, where
 * valgrind skips the words it knows to be undefined. The programs are built
 * at -O0 (no pointer kept in a register across calls) and call scrub_stack()
 * after dropping, which overwrites the stack below the caller's frame, where
 * the returned calls' frames were.
 */
#ifndef LEAKS_SCRUB_H
#define LEAKS_SCRUB_H

static void __attribute__((noinline)) scrub_stack(void)
{
	volatile char area[32768];

	for (size_t i = 0; i < sizeof(area); i++)
		area[i] = 0;
}

#endif
