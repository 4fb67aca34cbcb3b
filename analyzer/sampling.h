/* SPDX-License-Identifier: MIT */
/*
 * Sampled traces (docs/sampling.md): what one recorded block stands for.
 *
 * May not: print, allocate.
 */
#ifndef MEMTRACE_ANALYZER_SAMPLING_H
#define MEMTRACE_ANALYZER_SAMPLING_H

#include <stdint.h>

/* The expected bytes and blocks a recorded block stands for. */
struct mt_weight {
	uint64_t bytes;
	uint32_t blocks;
};

/*
 * A malloc-family block of size bytes recorded by a process whose sampling
 * interval is T (0: every block was recorded, and the block stands for
 * itself); key (its address and time, say) picks the rounding of the block
 * count, so that the count is unbiased and a replay reproducible.
 */
struct mt_weight mt_sampling_weight(uint64_t interval, uint64_t size, uint64_t key);

#endif
