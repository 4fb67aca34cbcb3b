/* SPDX-License-Identifier: MIT */
/*
 * The moment the fragmentation figures are of, and rss-above-live there
 * (see heap-findings.h): anonymous RSS against every byte traced live, the
 * heap's figures of a sample taken at their own moment, and what
 * malloc_trim(0) would give back then.
 *
 * May not: print, symbolize, keep anything per event.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap-findings.h"

#define MIB (1024ull * 1024ull)
/* Below this, RSS above what is traced is the ordinary slack of any process. */
#define GAP_MIN (16 * MIB)

/*
 * The most bytes traced live (host and mmap) from samples[i] to the end:
 * from the most live around that sample (mt_sample_point.traced_max), as RSS
 * may hold a block whose allocation or free was under way when it was read,
 * through everything the program held again later. Free heap memory the
 * program fills again (a training step's temporaries, freed before the
 * next step allocates them anew) is the heap working, not memory kept for
 * nothing.
 */
static uint64_t live_ahead(const struct mt_instance *in, uint64_t i)
{
	uint64_t most = in->samples[i].traced_max;

	for (uint64_t j = i; j < in->nsamples; j++)
		if (in->samples[j].traced_until_next > most)
			most = in->samples[j].traced_until_next;
	return most;
}

/* Anonymous RSS at samples[i] above the most the program held from then on. */
static int64_t gap_of(const struct mt_instance *in, uint64_t i)
{
	return (int64_t)mt_sample_anon(&in->samples[i]) - (int64_t)live_ahead(in, i);
}

/* The latest sample at or before samples[i] whose heap figures are of its own moment. */
static const struct mt_sample_point *heap_sample(const struct mt_instance *in, uint64_t i)
{
	for (uint64_t j = i + 1; j-- > 0;)
		if (!in->samples[j].values[MT_SAMPLE_HEAP_AGE])
			return &in->samples[j];
	return NULL;
}

/*
 * What malloc_trim(0) gives back at sample h: the heap's whole free pages,
 * its free top among them. The heap's pages (the arenas' `arena` bytes) less
 * those that live host blocks touch, the blocks glibc mmapped apart (its
 * `hblkhd` bytes) taken out of theirs; no more than the free bytes, and no
 * less than the free top.
 */
static uint64_t trim_would_return(const struct mt_sample_point *h)
{
	uint64_t arena = h->values[MT_SAMPLE_HEAP_ARENA],
	         mmapped = h->values[MT_SAMPLE_HEAP_MMAPPED];
	uint64_t in_heap = h->host_pages > mmapped ? h->host_pages - mmapped : 0;
	uint64_t whole = arena > in_heap ? arena - in_heap : 0;

	if (whole > h->values[MT_SAMPLE_HEAP_FREE])
		whole = h->values[MT_SAMPLE_HEAP_FREE];
	return whole > h->values[MT_SAMPLE_HEAP_TRIMMABLE] ? whole
	                                                   : h->values[MT_SAMPLE_HEAP_TRIMMABLE];
}

struct moment {
	const char *name, *text;
	uint64_t sample; /* index; UINT64_MAX: none */
};

/*
 * The RSS peak (its first sample) and the end of the steady phase, both
 * within the steady phase's end, so that teardown, which frees into the
 * heap and leaves RSS where it was, is never the moment; and death for a
 * killed process. A run too short for a steady phase has its last sample.
 */
static void moments(const struct mt_instance *in, struct moment m[3])
{
	uint64_t from, to = UINT64_MAX;
	bool killed = in->end == MT_END_KILLED;

	m[0] = (struct moment){"rss-peak", "RSS peak", UINT64_MAX};
	m[1] = (struct moment){"steady-end", "end of the steady phase", UINT64_MAX};
	m[2] = (struct moment){"death", "death", UINT64_MAX};
	if (!mt_heap_steady_phase(in, &from, &to))
		to = UINT64_MAX;
	for (int pass = 0; pass < 2 && m[1].sample == UINT64_MAX; pass++, to = UINT64_MAX)
		for (uint64_t i = 0; i < in->nsamples; i++) {
			const struct mt_sample_point *s = &in->samples[i];
			if (!s->values[MT_SAMPLE_RSS])
				continue;
			if (s->time > to)
				break;
			if (m[0].sample == UINT64_MAX ||
			    s->values[MT_SAMPLE_RSS] >
			            in->samples[m[0].sample].values[MT_SAMPLE_RSS])
				m[0].sample = i;
			m[1].sample = i;
		}
	for (uint64_t i = in->nsamples; killed && i-- > 0;)
		if (in->samples[i].values[MT_SAMPLE_RSS]) {
			m[2].sample = i;
			break;
		}
}

static void rss_above_live(struct mt_fragmentation *f, const struct mt_instance *in,
                           const struct mt_clock_fit *clk)
{
	char gtext[32], anon[32], rss[32], file[32], live[32], mm[32], ahead[32], hfree[32],
	        trim[32], ret[32], kfree[32];
	struct mt_finding *x;
	int64_t gap = (int64_t)f->rss_anon - (int64_t)f->live_ahead;
	uint64_t g = (uint64_t)gap, kept = f->heap_free_kept;
	double at = (double)(mt_clock_ns(clk, f->time) - mt_clock_ns(clk, in->start_time)) / 1e9;

	/* a gap under a quarter of anonymous RSS is thread stacks, relocated library data and
	 * ordinary allocator slack */
	if (gap < (int64_t)GAP_MIN || g < f->rss_anon / 4)
		return;
	/* outside the heap, relocated library data, thread stacks and memtrace's own tables grow
	 * with the code mapped (a bare `import torch`: a quarter of anonymous RSS): a gap there
	 * counts once it is half the file-backed RSS too. Free heap the program fills again
	 * later is no part of the heap's share (a float64 Adam loop's RSS peak: 45 MiB free, 25
	 * MiB of it allocated again in the next steps) */
	if (kept < g / 2 && g - kept < f->rss_file / 2)
		return;
	if (!(x = mt_diagnosis_add_finding(f, "rss-above-live", g)))
		return;
	mt_size_text(gtext, sizeof(gtext), g);
	mt_size_text(ahead, sizeof(ahead), f->live_ahead);
	mt_size_text(anon, sizeof(anon), f->rss_anon);
	mt_size_text(rss, sizeof(rss), f->rss);
	mt_size_text(file, sizeof(file), f->rss_file);
	mt_size_text(live, sizeof(live), f->live_host_bytes);
	mt_size_text(mm, sizeof(mm), f->live_mmap_bytes);
	mt_size_text(hfree, sizeof(hfree), f->heap_free);
	mt_size_text(trim, sizeof(trim), f->heap_trimmable);
	mt_size_text(ret, sizeof(ret), f->trim_would_return);
	mt_size_text(kfree, sizeof(kfree), kept);
	snprintf(x->text, sizeof(x->text),
	         "at the %s (%.3f s) anonymous RSS %s is %s above the most memtrace traced live "
	         "from then to the end (%s; then %s of heap blocks, %s of mmap); RSS %s in all, "
	         "%s file-backed; the heap held %s free, %s of it at the top, %s of it never "
	         "filled again",
	         f->moment_text, at, anon, gtext, ahead, live, mm, rss, file, hfree, trim, kfree);
	if (kept >= g / 2)
		/* the sampler's thread is one of in->threads: more than two means the program's own
		 */
		snprintf(x->advice, sizeof(x->advice),
		         "the gap is free memory the malloc heap keeps: malloc_trim(0) after the "
		         "phase that freed it returns %s (the free top and the whole free pages "
		         "between live blocks); lower MALLOC_TRIM_THRESHOLD_ so glibc trims by "
		         "itself%s; MALLOC_MMAP_THRESHOLD_ keeps large blocks out of the heap; an "
		         "allocator that returns memory eagerly (jemalloc, tcmalloc) is the "
		         "lasting fix",
		         ret,
		         in->threads > 2 ? "; with several threads, MALLOC_ARENA_MAX=2 stops "
		                           "per-thread arenas from each keeping free memory"
		                         : "");
	else
		snprintf(x->advice, sizeof(x->advice),
		         "most of the gap is neither traced nor free heap memory: thread stacks, "
		         "libraries' relocated data, memory of allocators memtrace does not see "
		         "(memory a program gets from glibc past the preload: see untraced-heap); "
		         "compare Pss and Private_Dirty%s",
		         in->threads > 2
		                 ? ", and MALLOC_ARENA_MAX=2 if many threads each have an arena"
		                 : "");
}

void mt_heap_moment(struct mt_diagnosis *d, const struct mt_instance *in,
                    const struct mt_clock_fit *clk)
{
	struct mt_fragmentation *f = &d->frag;
	const struct mt_sample_point *s, *h;
	struct moment m[3];
	uint64_t refill;
	int best = -1;

	moments(in, m);
	/* of the moments, the one where the gap is widest; of equal gaps the earlier */
	for (int i = 0; i < 3; i++)
		if (m[i].sample != UINT64_MAX &&
		    (best < 0 || gap_of(in, m[i].sample) > gap_of(in, m[best].sample)))
			best = i;
	if (best < 0)
		return;
	s = &in->samples[m[best].sample];
	f->have = true;
	f->moment = m[best].name;
	f->moment_text = m[best].text;
	f->time = s->time;
	f->rss = s->values[MT_SAMPLE_RSS];
	f->rss_anon = mt_sample_anon(s);
	f->rss_file = f->rss - f->rss_anon;
	f->live_host_bytes = s->live_host;
	f->live_mmap_bytes = s->live_mmap;
	f->rss_minus_live_peak = (int64_t)f->rss - (int64_t)s->live_host;
	f->anon_minus_traced = (int64_t)f->rss_anon - (int64_t)s->traced_max;
	f->live_ahead = live_ahead(in, m[best].sample);
	if ((h = heap_sample(in, m[best].sample))) {
		f->heap_time = h->time;
		f->heap_live_host = h->live_host;
		f->heap_arena = h->values[MT_SAMPLE_HEAP_ARENA];
		f->heap_in_use = h->values[MT_SAMPLE_HEAP_IN_USE];
		f->heap_free = h->values[MT_SAMPLE_HEAP_FREE];
		f->heap_trimmable = h->values[MT_SAMPLE_HEAP_TRIMMABLE];
	}
	f->trim_would_return = h ? trim_would_return(h) : 0;
	/* the free heap the program did not fill again: what it held later came from there first */
	refill = f->live_ahead - (s->live_host + s->live_mmap);
	f->heap_free_kept = f->heap_free > refill ? f->heap_free - refill : 0;
	rss_above_live(f, in, clk);
}
