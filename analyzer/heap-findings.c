/* SPDX-License-Identifier: MIT */
/*
 * The steady phase and rss-grows-not-live (see heap-findings.h). RSS, the
 * heap's free bytes and the bytes traced live are always taken from one
 * SAMPLE (its figures and the replay's live bytes at its moment), never a
 * figure of one moment beside another's.
 *
 * May not: print, symbolize, keep anything per event.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap-findings.h"

#define MIB (1024ull * 1024ull)
/* Growth that small over the steady part is the ordinary drift of a process. */
#define GROWS_PER_MARK_MIN (8 * MIB) /* in all over the marks */
#define GROWS_STEADY_MIN   (16 * MIB)
/* The steady phase ends where the bytes traced live last stood within 5% of their most. */
/* Teardown is looked for in the last fifth of the life. */
#define TEARDOWN_PART   5
#define STEADY_PART_NUM 19
#define STEADY_PART_DEN 20
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
	if (in->program_end <= in->start_time)
		return false;
	life = in->program_end - in->start_time;
	*from = in->start_time + life / 4;
	/*
	 * The end: the last sample before the final fall of the bytes traced
	 * live, looked for in the last fifth of the life only: a program whose
	 * main work frees (and then holds what is left) is not tearing down.
	 */
	tail = in->program_end - life / TEARDOWN_PART;
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

uint64_t mt_sample_anon(const struct mt_sample_point *s)
{
	uint64_t rss = s->values[MT_SAMPLE_RSS], file = s->values[MT_SAMPLE_RSS_FILE];

	return file && file <= rss ? rss - file : rss;
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
	return (struct point){x, (double)mt_sample_anon(s), (double)(s->live_host + s->live_mmap),
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

/*
 * The threshold raise that explains the growth, "" when none was seen: the free that set the
 * threshold as it stands, which a first, smaller raise is not.
 */
static void threshold_text(char *buf, size_t n, const struct mt_mmap_threshold *m,
                           const struct mt_instance *in, const struct mt_clock_fit *clk)
{
	char t[32], l[32];
	double at =
	        (double)(mt_clock_ns(clk, m->threshold_time) - mt_clock_ns(clk, in->start_time)) /
	        1e9;

	buf[0] = 0;
	if (!m->raised || !m->large_after)
		return;
	mt_size_text(t, sizeof(t), m->threshold);
	mt_size_text(l, sizeof(l), m->large_after_bytes);
	/* a ring's window may start after the first raise: say what it stood at by then */
	if (in->window_start)
		snprintf(buf, n,
		         "; by %.3f s, when a free of a %s block came, glibc's dynamic mmap "
		         "threshold stood at %s or more",
		         at, t, t);
	else
		snprintf(buf, n,
		         "; a free of a %s block at %.3f s raised glibc's dynamic mmap threshold "
		         "to %s",
		         t, at, t);
	snprintf(buf + strlen(buf), n - strlen(buf),
	         ", so %" PRIu64 " later blocks of 128 KiB to %s (%s) came from the heap, which "
	         "keeps their memory when they are freed",
	         m->large_after, t, l);
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
	         "anonymous RSS grew %s%s %s while the bytes traced live (heap and mmap) grew "
	         "%s%s; the "
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

void mt_heap_findings(struct mt_diagnosis *d, const struct mt_instance *in,
                      const struct mt_clock_fit *clk)
{
	uint64_t cap = in->nsamples > in->nmarks ? in->nsamples : in->nmarks;
	struct point *p;

	if (!in->nsamples || !(p = malloc(cap * sizeof(*p))))
		return; /* without room for the series, no finding rather than a wrong one */
	rss_grows_not_live(d, in, clk, p);
	free(p);
}
