/* SPDX-License-Identifier: MIT */
/*
 * bench-small: N small malloc/free pairs (default 20 million), each at the end
 * of one of 1000 distinct call chains 8 to 40 frames deep. This is the
 * tracer's hot path at its most demanding: tiny, cheap allocations with deep
 * stacks to unwind. Usage: bench-small [PAIRS]
 *
 * Prints one line: the pair count, the allocator calls made (the events a
 * tracer should record) and a checksum that keeps every pair observable.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bench-common.h"
#include "bench-walk.h"

int main(int argc, char **argv)
{
	static struct walk_path paths[WALK_PATHS];
	static struct walk w = { .rng = 1 };
	uint64_t n = bench_count(argc, argv, 20000000);

	walk_build_paths(paths);
	walk_run(&w, paths, n);
	walk_finish(&w);

	printf("bench-small: pairs=%" PRIu64 " stacks=%d calls=%" PRIu64 " checksum=%016" PRIx64 "\n",
	       n, WALK_PATHS, w.mallocs + w.frees, w.sum);
	bench_report_rusage();
	return 0;
}
