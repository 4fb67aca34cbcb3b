/* SPDX-License-Identifier: MIT */
/*
 * The untraced-heap finding (diagnosis.h): glibc says more of its heap is in
 * use than memtrace saw allocated. What memtrace cannot see is memory that
 * came from glibc's allocator past the preload: its __libc_malloc,
 * __libc_calloc, __libc_memalign called by name. (A libc loaded apart, by
 * dlmopen or statically, has a heap of its own that mallinfo2 does not
 * count either: no figure shows it.) Such memory is in no report figure, so a leak there is
 * invisible; this finding says that it exists and how much.
 *
 * It is judged at the last sample whose heap figures were taken at its own
 * moment (heap age 0), so that they and the live bytes replayed to it are
 * of one instant: the very last sample may carry figures from before a
 * burst of frees (a torch run's last held 27 MiB in use from 117 ms
 * earlier, against 10 MiB live after its teardown). glibc's in-use
 * bytes (uordblks + hblkhd) count whole chunks, a little more than the
 * bytes asked: the overhead allowed per live block is named below.
 *
 * May not: print, keep anything per event.
 */
#include <stdio.h>

#include "diagnosis.h"

#define MIB (1024ull * 1024ull)
/*
 * glibc's chunk for a request: the request plus an 8-byte header, rounded
 * up to 16, and 32 at least: at most 24 bytes more than asked (32 for the
 * smallest). An mmapped chunk is rounded up to a page, but only blocks of
 * 128 KiB or more are mmapped, where a page is under 3%, which the
 * quarter below covers.
 */
#define CHUNK_OVERHEAD_MAX 32
/* Below this the difference is not worth a finding. */
#define UNTRACED_MIN (16 * MIB)

void mt_finding_untraced_heap(struct mt_fragmentation *f, const struct mt_instance *in)
{
	const struct mt_sample_point *s;
	uint64_t in_use, seen, gap, i;
	char g[32], u[32], l[32];
	struct mt_finding *x;

	for (s = NULL, i = in->nsamples; i-- > 0 && !s;)
		if (!in->samples[i].values[MT_SAMPLE_HEAP_AGE])
			s = &in->samples[i];
	if (!s)
		return;
	in_use = s->values[MT_SAMPLE_HEAP_IN_USE] + s->values[MT_SAMPLE_HEAP_MMAPPED];
	seen = s->live_host + s->live_host_blocks * CHUNK_OVERHEAD_MAX;
	if (in_use <= seen || in_use - seen < UNTRACED_MIN || in_use - seen < in_use / 4)
		return;
	gap = in_use - s->live_host;
	if (!(x = mt_diagnosis_add_finding(f, "untraced-heap", gap)))
		return;
	mt_size_text(g, sizeof(g), gap);
	mt_size_text(u, sizeof(u), in_use);
	mt_size_text(l, sizeof(l), s->live_host);
	snprintf(x->text, sizeof(x->text),
	         "at the last fresh heap figures glibc's heap had %s in use (mallinfo2 uordblks + "
	         "hblkhd) while "
	         "memtrace saw %s of heap blocks live: %s came from glibc's allocator past "
	         "memtrace and is in no figure of this report",
	         u, l, g);
	snprintf(x->advice, sizeof(x->advice),
	         "look for code that reaches glibc's allocator without calling malloc: "
	         "glibc's __libc_malloc, __libc_calloc or __libc_memalign called by name; call "
	         "malloc instead, so that its memory is traced (and its leaks seen)");
}
