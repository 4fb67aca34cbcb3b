/* SPDX-License-Identifier: MIT */
/*
 * Findings about the malloc heap that judge the sampler's series against
 * what the replay knows was live, each a small function over one instance's
 * samples and marks adding to the diagnosis's findings (diagnosis.h): RSS
 * against everything traced at the moments that matter (rss-above-live,
 * heap-moment.c), RSS that grows while live memory does not
 * (rss-grows-not-live, heap-findings.c), and per-thread arenas far above
 * the live peak (arena-bloat, arenas.c).
 *
 * May not: print, symbolize, keep anything per event.
 */
#ifndef MEMTRACE_ANALYZER_HEAP_FINDINGS_H
#define MEMTRACE_ANALYZER_HEAP_FINDINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "diagnosis.h"

/*
 * The steady part of an instance's life, in ticks: from its first MARK to
 * its last when it has two or more; else from a quarter of its life to the
 * last sample where the bytes traced live (host and mmap) stood within 5%
 * of their most in the last fifth of the life, so that start-up (imports)
 * and teardown (an
 * interpreter's exit, destructors, which free and leave RSS where it was)
 * are left out. False when the instance has no such part.
 */
bool mt_heap_steady_phase(const struct mt_instance *in, uint64_t *from, uint64_t *to);

/*
 * A sample's anonymous RSS: RSS less its file-backed and shared part (code
 * paged in as a program imports more of it is no heap growth); all of RSS
 * in a trace without the split.
 */
uint64_t mt_sample_anon(const struct mt_sample_point *s);

/*
 * Chooses the moment d->frag is of, fills in its figures and judges
 * rss-above-live there (the first of the findings over the sampler's series).
 */
void mt_heap_moment(struct mt_diagnosis *d, const struct mt_instance *in,
                    const struct mt_clock_fit *fit);

/* arenas.c: arena-bloat, over the blocks mt_diagnosis_note_arena saw. */
void mt_arena_bloat(struct mt_diagnosis *d, const struct mt_instance *in,
                    const struct mt_clock_fit *fit);

/* After the series are summed up and the moment judged: rss-grows-not-live. */
void mt_heap_findings(struct mt_diagnosis *d, const struct mt_instance *in,
                      const struct mt_clock_fit *fit);

#endif
