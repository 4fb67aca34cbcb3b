/* SPDX-License-Identifier: MIT */
/*
 * Heap findings (see heap-findings.h). RSS, the heap's free bytes and the
 * bytes traced live are always taken from one SAMPLE (its figures and the
 * replay's live bytes at its moment), never a figure of one moment beside
 * another's.
 *
 * May not: print, symbolize, keep anything per event.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap-findings.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
/* Growth that small over the steady part is the ordinary drift of a process. */
#define GROWS_PER_MARK_MIN (8 * MIB) /* in all over the marks */
#define GROWS_STEADY_MIN   (16 * MIB)
/* The steady phase ends where the bytes traced live last stood within 5% of their most. */
/* Teardown is looked for in the last fifth of the life. */
#define TEARDOWN_PART   5
#define STEADY_PART_NUM 19
#define STEADY_PART_DEN 20
/* Below this, RSS above what is traced is the ordinary slack of any process. */
#define GAP_MIN (16 * MIB)
/* Growth is steady when a line explains this much of RSS's variance. */
#define GROWS_MIN_R2 0.5
/* Live growth explains RSS growth when it is at least this part of it. */
#define EXPLAINED_PART 2

bool mt_heap_steady_phase(const struct mt_instance *in, uint64_t *from, uint64_t *to)
{
	uint64_t most = 0, life, tail;
	bool any = false;

	if (in->nmarks >= 2) {
		*from = in->marks[0].time;
		*to = in->marks[in->nmarks - 1].time;
		return *to > *from;
	}
	if (in->end_time <= in->start_time)
		return false;
	life = in->end_time - in->start_time;
	*from = in->start_time + life / 4;
	/*
	 * The end: the last sample before the final fall of the bytes traced
	 * live, looked for in the last fifth of the life only: a program whose
	 * main work frees (and then holds what is left) is not tearing down.
	 */
	tail = in->end_time - life / TEARDOWN_PART;
	if (tail < *from)
		tail = *from;
	for (uint64_t i = 0; i < in->nsamples; i++) {
		const struct mt_sample_point *s = &in->samples[i];
		if (s->time >= tail && s->live_host + s->live_mmap > most)
			most = s->live_host + s->live_mmap;
	}
	for (uint64_t i = 0; i < in->nsamples; i++) {
		const struct mt_sample_point *s = &in->samples[i];
		if (s->time >= *from &&
		    (s->time < tail ||
		     (s->live_host + s->live_mmap) * STEADY_PART_DEN >= most * STEADY_PART_NUM)) {
			*to = s->time;
			any = true;
		}
	}
	return any && *to > *from;
}

/* One moment of the series: x is the mark index or ns into the steady part. */
struct point {
	double x, rss, live, free;
};

struct line {
	double slope, r2;
};

enum field { FIELD_RSS, FIELD_LIVE, FIELD_FREE };

static double y_of(const struct point *p, enum field f)
{
	return f == FIELD_RSS ? p->rss : f == FIELD_LIVE ? p->live : p->free;
}

/* Least squares of a field over x. */
static struct line fit(const struct point *p, size_t n, enum field field)
{
	double mx = 0, my = 0, sxx = 0, sxy = 0, syy = 0;
	struct line l = {0, 0};

	for (size_t i = 0; i < n; i++) {
		mx += p[i].x;
		my += y_of(&p[i], field);
	}
	mx /= (double)n;
	my /= (double)n;
	for (size_t i = 0; i < n; i++) {
		double dx = p[i].x - mx, dy = y_of(&p[i], field) - my;
		sxx += dx * dx;
		sxy += dx * dy;
		syy += dy * dy;
	}
	if (sxx <= 0)
		return l;
	l.slope = sxy / sxx;
	l.r2 = syy > 0 ? sxy * sxy / (sxx * syy) : 0;
	return l;
}

static struct point point_of(const struct mt_sample_point *s, double x)
{
	return (struct point){x, (double)s->values[MT_SAMPLE_RSS],
	                      (double)(s->live_host + s->live_mmap),
	                      (double)s->values[MT_SAMPLE_HEAP_FREE]};
}

/*
 * Per mark: the last sample before each MARK, when it was taken after the
 * previous one (a sampler that fell behind gives that mark no figure rather
 * than the last step's).
 */
static size_t per_mark(const struct mt_instance *in, struct point *p)
{
	size_t n = 0;

	for (uint32_t k = 0; k < in->nmarks; k++) {
		const struct mt_sample_point *s = mt_diagnosis_sample_before(in, in->marks[k].time);
		uint64_t prev = k ? in->marks[k - 1].time : in->start_time;
		if (s && s->time > prev && s->values[MT_SAMPLE_RSS])
			p[n++] = point_of(s, (double)k);
	}
	return n;
}

static size_t steady(const struct mt_instance *in, const struct mt_clock_fit *clk, struct point *p)
{
	uint64_t from, to, origin;
	size_t n = 0;

	if (!mt_heap_steady_phase(in, &from, &to))
		return 0;
	origin = mt_clock_ns(clk, from);
	for (uint64_t i = 0; i < in->nsamples; i++) {
		const struct mt_sample_point *s = &in->samples[i];
		if (s->time >= from && s->time <= to && s->values[MT_SAMPLE_RSS])
			p[n++] = point_of(s, (double)(mt_clock_ns(clk, s->time) - origin));
	}
	return n;
}

static void signed_size(char *buf, size_t n, double bytes)
{
	if (bytes > 0)
		mt_size_text(buf, n, (uint64_t)(bytes + 0.5));
	else
		snprintf(buf, n, "nothing");
}

/* The threshold raise that explains the growth, "" when none was seen. */
static void threshold_text(char *buf, size_t n, const struct mt_mmap_threshold *m,
                           const struct mt_instance *in, const struct mt_clock_fit *clk)
{
	char t[32], l[32];

	buf[0] = 0;
	if (!m->raised || !m->large_after)
		return;
	mt_size_text(t, sizeof(t), m->threshold);
	mt_size_text(l, sizeof(l), m->large_after_bytes);
	snprintf(buf, n,
	         "; a free of a %s block at %.3f s raised glibc's dynamic mmap threshold to %s, "
	         "so %" PRIu64 " later blocks of 128 KiB to %s (%s) came from the heap, which "
	         "keeps their memory when they are freed",
	         t,
	         (double)(mt_clock_ns(clk, m->raise_time) - mt_clock_ns(clk, in->start_time)) / 1e9,
	         t, m->large_after, t, l);
}

/*
 * rss-grows-not-live: RSS rises steadily through the marks (or the steady
 * part) while the bytes traced live do not explain it. Its figure is the
 * unexplained growth per mark, or over the steady part without marks.
 */
static void rss_grows_not_live(struct mt_diagnosis *d, const struct mt_instance *in,
                               const struct mt_clock_fit *clk, struct point *p)
{
	char rss[32], live[32], hfree[32], raise[320], unit[16], span[48];
	double grew, lived, freed, unexplained;
	struct mt_finding *x;
	struct line r;
	size_t n = per_mark(in, p);
	bool marks = n >= 3;

	if (!marks && (n = steady(in, clk, p)) < 3)
		return;
	r = fit(p, n, FIELD_RSS);
	if (r.slope <= 0 || r.r2 < GROWS_MIN_R2)
		return;
	if (marks) {
		/* per mark: the slopes, over the marks the samples span */
		grew = r.slope;
		lived = fit(p, n, FIELD_LIVE).slope;
		freed = fit(p, n, FIELD_FREE).slope;
	} else {
		/* over the steady part: what was observed from its first sample to its last */
		grew = p[n - 1].rss - p[0].rss;
		lived = p[n - 1].live - p[0].live;
		freed = p[n - 1].free - p[0].free;
	}
	unexplained = grew - (lived > 0 ? lived : 0);
	if (lived * EXPLAINED_PART > grew ||
	    unexplained * (marks ? p[n - 1].x - p[0].x : 1) <
	            (double)(marks ? GROWS_PER_MARK_MIN : GROWS_STEADY_MIN))
		return;
	if (!(x = mt_diagnosis_add_finding(&d->frag, "rss-grows-not-live",
	                                   (uint64_t)(unexplained + 0.5))))
		return;
	signed_size(rss, sizeof(rss), grew);
	signed_size(live, sizeof(live), lived);
	signed_size(hfree, sizeof(hfree), freed);
	threshold_text(raise, sizeof(raise), &d->mmap_threshold, in, clk);
	snprintf(unit, sizeof(unit), marks ? " per mark" : "");
	if (marks)
		snprintf(span, sizeof(span), "over %u marks", in->nmarks);
	else
		snprintf(span, sizeof(span), "over the steady part of the run");
	snprintf(x->text, sizeof(x->text),
	         "RSS grew %s%s %s while the bytes traced live (heap and mmap) grew %s%s; the "
	         "heap's free bytes grew %s%s%s",
	         rss, unit, span, live, unit, hfree, unit, raise);
	if (freed * 2 >= unexplained)
		snprintf(x->advice, sizeof(x->advice),
		         "the heap keeps the memory of large blocks freed below live ones: set "
		         "MALLOC_MMAP_THRESHOLD_=131072 (a fixed threshold turns glibc's dynamic "
		         "one "
		         "off), so blocks of 128 KiB or more are mmapped and go back to the system "
		         "when freed; meanwhile malloc_trim(0) after each step returns the whole "
		         "free "
		         "pages; jemalloc or tcmalloc return memory eagerly");
	else
		snprintf(x->advice, sizeof(x->advice),
		         "most of the growth is neither live nor free heap memory: memory of an "
		         "allocator memtrace does not see, file mappings or thread stacks; compare "
		         "Pss and Private_Dirty over the run; if glibc's threshold was raised, "
		         "MALLOC_MMAP_THRESHOLD_=131072 still keeps large blocks out of the heap");
}

/* ---- the moment judged, and rss-above-live there ---- */

/* RSS less its file-backed part; all of it in a trace without the split. */
static uint64_t anon_of(const struct mt_sample_point *s)
{
	uint64_t rss = s->values[MT_SAMPLE_RSS], file = s->values[MT_SAMPLE_RSS_FILE];

	return file && file <= rss ? rss - file : rss;
}

static int64_t gap_of(const struct mt_sample_point *s)
{
	return (int64_t)anon_of(s) - (int64_t)(s->live_host + s->live_mmap);
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
	char gap[32], anon[32], rss[32], file[32], live[32], mm[32], hfree[32], trim[32], ret[32];
	struct mt_finding *x;
	uint64_t g = (uint64_t)f->anon_minus_traced, heap_free = f->heap_free;
	double at = (double)(mt_clock_ns(clk, f->time) - mt_clock_ns(clk, in->start_time)) / 1e9;

	/* a gap under a quarter of anonymous RSS is thread stacks, relocated library data and
	 * ordinary allocator slack */
	if (f->anon_minus_traced < (int64_t)GAP_MIN || g < f->rss_anon / 4)
		return;
	/* outside the heap, relocated library data, thread stacks and memtrace's own tables grow
	 * with the code mapped (a bare `import torch`: a quarter of anonymous RSS): a gap there
	 * counts once it is half the file-backed RSS too */
	if (heap_free < g / 2 && g - heap_free < f->rss_file / 2)
		return;
	if (!(x = mt_diagnosis_add_finding(f, "rss-above-live", g)))
		return;
	mt_size_text(gap, sizeof(gap), g);
	mt_size_text(anon, sizeof(anon), f->rss_anon);
	mt_size_text(rss, sizeof(rss), f->rss);
	mt_size_text(file, sizeof(file), f->rss_file);
	mt_size_text(live, sizeof(live), f->live_host_bytes);
	mt_size_text(mm, sizeof(mm), f->live_mmap_bytes);
	mt_size_text(hfree, sizeof(hfree), f->heap_free);
	mt_size_text(trim, sizeof(trim), f->heap_trimmable);
	mt_size_text(ret, sizeof(ret), f->trim_would_return);
	snprintf(x->text, sizeof(x->text),
	         "at the %s (%.3f s) anonymous RSS %s is %s above what memtrace traced live (%s "
	         "of heap blocks, %s of mmap); RSS %s in all, %s file-backed; the heap held %s "
	         "free, %s of it at the top",
	         f->moment_text, at, anon, gap, live, mm, rss, file, hfree, trim);
	if (heap_free >= g / 2)
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
	int best = -1;

	moments(in, m);
	/* of the moments, the one where the gap is widest; of equal gaps the earlier */
	for (int i = 0; i < 3; i++)
		if (m[i].sample != UINT64_MAX &&
		    (best < 0 ||
		     gap_of(&in->samples[m[i].sample]) > gap_of(&in->samples[m[best].sample])))
			best = i;
	if (best < 0)
		return;
	s = &in->samples[m[best].sample];
	f->have = true;
	f->moment = m[best].name;
	f->moment_text = m[best].text;
	f->time = s->time;
	f->rss = s->values[MT_SAMPLE_RSS];
	f->rss_anon = anon_of(s);
	f->rss_file = f->rss - f->rss_anon;
	f->live_host_bytes = s->live_host;
	f->live_mmap_bytes = s->live_mmap;
	f->rss_minus_live_peak = (int64_t)f->rss - (int64_t)s->live_host;
	f->anon_minus_traced = gap_of(s);
	if ((h = heap_sample(in, m[best].sample))) {
		f->heap_time = h->time;
		f->heap_live_host = h->live_host;
		f->heap_arena = h->values[MT_SAMPLE_HEAP_ARENA];
		f->heap_in_use = h->values[MT_SAMPLE_HEAP_IN_USE];
		f->heap_free = h->values[MT_SAMPLE_HEAP_FREE];
		f->heap_trimmable = h->values[MT_SAMPLE_HEAP_TRIMMABLE];
	}
	f->trim_would_return = h ? trim_would_return(h) : 0;
	rss_above_live(f, in, clk);
}

/* ---- arena-bloat ---- */

#define HEAP_ALIGN_SHIFT 26 /* glibc's non-main heaps: 64 MiB, aligned to it */
#define MMAPPED_OFFSET   16 /* a block glibc mmapped alone starts this far into its page */
/* Arenas hold far more than the live peak: three times it (two arenas each holding a
 * peak's worth is what MALLOC_ARENA_MAX=2 costs at most) and this much more. */
#define ARENA_TIMES_PEAK 3
#define ARENA_EXCESS_MIN (32 * MIB)

/*
 * The main heap grows up from the executable's end (brk); the other arenas
 * are mappings, below the libraries as every mapping the kernel places: far
 * apart either way. Blocks closer to the libraries than to the executable
 * are not in the main heap.
 */
static void find_floor(struct mt_arenas *a, const struct mt_instance *in)
{
	/* the executable is the first module */
	uint64_t exe = in->nmodules ? in->modules[0].base : 0, lib = UINT64_MAX;

	for (uint32_t i = 1; i < in->nmodules; i++)
		if (in->modules[i].base > exe && in->modules[i].base < lib)
			lib = in->modules[i].base;
	a->floor = lib == UINT64_MAX ? UINT64_MAX : exe + (lib - exe) / 2;
	a->modules_seen = in->nmodules;
}

void mt_diagnosis_note_arena(struct mt_diagnosis *d, const struct mt_instance *in, uint64_t addr,
                             uint64_t size)
{
	struct mt_arenas *a = &d->arenas;
	uint64_t heap = addr >> HEAP_ALIGN_SHIFT;
	uint32_t i;

	if (a->modules_seen != in->nmodules)
		find_floor(a, in);
	if (!in->nmodules || addr < a->floor || (addr & 0xfff) == MMAPPED_OFFSET)
		return;
	a->blocks++;
	a->bytes += size;
	for (i = 0; i < a->nheaps && a->heaps[i] != heap; i++)
		;
	if (i == a->nheaps && a->nheaps < MT_ARENAS_MAX)
		a->heaps[a->nheaps++] = heap;
}

/*
 * arena-bloat: blocks were live in arenas besides the main heap, and glibc's
 * arenas together (mallinfo2's arena at its most) stood far above the live
 * peak. Its figure is that arena total.
 */
static void arena_bloat(struct mt_diagnosis *d, const struct mt_instance *in,
                        const struct mt_clock_fit *clk)
{
	const struct mt_arenas *a = &d->arenas;
	uint64_t most = 0, at = 0, peak = in->kind[MT_KIND_HOST].peak_bytes;
	char total[32], live[32], there[32];
	struct mt_finding *x;

	if (!a->nheaps)
		return; /* one arena: the main heap */
	for (uint64_t i = 0; i < in->nsamples; i++)
		if (in->samples[i].values[MT_SAMPLE_HEAP_ARENA] > most) {
			most = in->samples[i].values[MT_SAMPLE_HEAP_ARENA];
			at = in->samples[i].time;
		}
	if (most < ARENA_TIMES_PEAK * peak || most - peak < ARENA_EXCESS_MIN ||
	    !(x = mt_diagnosis_add_finding(&d->frag, "arena-bloat", most)))
		return;
	mt_size_text(total, sizeof(total), most);
	mt_size_text(live, sizeof(live), peak);
	mt_size_text(there, sizeof(there), a->bytes);
	snprintf(x->text, sizeof(x->text),
	         "glibc's arenas held %s (at %.3f s) for a live peak of %s: %" PRIu64
	         " blocks (%s) came from %s%u heaps of arenas besides the main one; each thread "
	         "that "
	         "allocates while others do gets an arena of its own, which keeps what it freed "
	         "for that thread",
	         total, (double)(mt_clock_ns(clk, at) - mt_clock_ns(clk, in->start_time)) / 1e9,
	         live, a->blocks, there, a->nheaps == MT_ARENAS_MAX ? "at least " : "", a->nheaps);
	snprintf(x->advice, sizeof(x->advice),
	         "set MALLOC_ARENA_MAX=2 (or 1): threads then share arenas and reuse each other's "
	         "free memory; or use an allocator whose thread caches give memory back "
	         "(jemalloc, tcmalloc)");
}

void mt_heap_findings(struct mt_diagnosis *d, const struct mt_instance *in,
                      const struct mt_clock_fit *clk)
{
	uint64_t cap = in->nsamples > in->nmarks ? in->nsamples : in->nmarks;
	struct point *p;

	if (!in->nsamples || !(p = malloc(cap * sizeof(*p))))
		return; /* without room for the series, no finding rather than a wrong one */
	rss_grows_not_live(d, in, clk, p);
	free(p);
	arena_bloat(d, in, clk);
}
