/* SPDX-License-Identifier: MIT */
/*
 * Growth (see diagnosis.h): which stacks' live bytes keep rising through the
 * run, and by how much.
 *
 * A stack grows when the floor of its live bytes (the least at any position
 * of a window of the growth series, so that what a step frees again does not
 * count) rises from each eighth of the series to the next through the whole
 * later half, up to the last eighth: the rise goes on to the end. A one-time allocation at
 * start-up, a rise then a plateau, a rise then a fall all fail that; and a
 * rise too small against the process's live peak is not worth a line.
 *
 * The figures are what was observed, from the floor where the rise began to
 * the last position, never a fitted line extrapolated over the run; the
 * least-squares fits over all checkpoints and marks are kept only to say
 * how straight the rise was (r2).
 *
 * May not: print, symbolize, keep anything per event.
 */
#include <errno.h>
#include <stdlib.h>

#include "diagnosis.h"

/* Below these a rise is the ordinary drift of a process: a free list, a cache, a log line. */
#define GROWTH_MIN_BYTES (64ull * 1024)
#define GROWTH_MIN_SHARE 50 /* at least 1/50 of the process's live peak (host and mmap) */

struct fit {
	long double slope, r2;
};

/*
 * Least squares of y over x from the sums. The numerators are exact in 128
 * bits (a difference of two large sums loses everything in a double); only
 * the final quotients are floating point.
 */
static struct fit fit_sums(uint64_t n, mt_u128 sx, mt_u128 sxx, mt_u128 sy, mt_u128 sxy,
                           mt_u128 syy)
{
	struct fit f = {0};
	mt_i128 dx, dy, num;

	if (n < 2)
		return f;
	dx = (mt_i128)(n * sxx - sx * sx);
	num = (mt_i128)(n * sxy) - (mt_i128)(sx * sy);
	dy = (mt_i128)(n * syy - sy * sy);
	if (dx <= 0)
		return f;
	f.slope = (long double)num / (long double)dx;
	f.r2 = dy > 0 ? ((long double)num / (long double)dx) * ((long double)num / (long double)dy)
	              : 0;
	return f;
}

/*
 * The window where the rise began, or -1 when the stack does not grow: the
 * floors rise strictly through the later half, the last eighth included
 * (a fall or a plateau there lowers or holds its floor); the rise began at
 * the earliest window from which every floor is above the one before.
 */
static int rise_start(const struct mt_stack_stats *s)
{
	const uint64_t *f = s->floor;
	int w;

	for (w = MT_GROWTH_WINDOWS / 2 + 1; w < MT_GROWTH_WINDOWS; w++)
		if (f[w - 1] >= f[w])
			return -1;
	for (w = MT_GROWTH_WINDOWS / 2; w > 0 && f[w - 1] < f[w]; w--)
		;
	return w;
}

int mt_diagnosis_add_stack(struct mt_diagnosis *d, const struct mt_instance *in,
                           const struct mt_stack_stats *s)
{
	const struct mt_growth_series *ser = &in->series;
	const struct mt_checkpoints *c = &in->checkpoints;
	uint64_t m = in->nmarks, total, rise, first, span, ns;
	struct mt_growth g = {0};
	struct fit t, k = {0};
	int w0;

	/* fewer MARKs replayed than the first pass counted: a corrupt trace, no figure per mark */
	if (!ser->n || (ser->marks && in->nmarks < ser->n) || (w0 = rise_start(s)) < 0)
		return 0;
	rise = s->last - s->floor[w0];
	total = in->kind[MT_KIND_HOST].peak_bytes + in->kind[MT_KIND_MMAP].peak_bytes;
	if (rise < GROWTH_MIN_BYTES || rise < total / GROWTH_MIN_SHARE)
		return 0;
	/* the first position of window w0 */
	first = ((uint64_t)w0 * ser->n + MT_GROWTH_WINDOWS - 1) / MT_GROWTH_WINDOWS;
	span = ser->n - 1 - first; /* positions, first excluded, to the last; >= 1 */
	g.kind = s->kind;
	g.stack = s->stack;
	g.stack_instance = s->stack_instance;
	g.from_bytes = s->floor[w0];
	g.end_bytes = s->last;
	g.per_mark = ser->marks;
	if (ser->marks) {
		/* each mark starts a step: the steps measured are the marks from the rise on */
		g.bytes_per_mark = (double)rise / (double)span;
		g.grown_bytes = (int64_t)(g.bytes_per_mark * (double)(span + 1) + 0.5);
		ns = in->marks[ser->n - 1].ns > in->marks[first].ns
		             ? in->marks[ser->n - 1].ns - in->marks[first].ns
		             : 0;
	} else {
		g.grown_bytes = (int64_t)rise;
		ns = (uint64_t)((long double)(ser->end_ns - ser->start_ns) * (long double)span /
		                (long double)(ser->n - 1));
	}
	g.bytes_per_second = ns ? (double)rise * 1e9 / (double)ns : 0;
	t = fit_sums(c->n, c->sx, c->sxx, s->t_sy, s->t_sxy, s->t_syy);
	if (m >= 3)
		k = fit_sums(m, (mt_u128)m * (m - 1) / 2, (mt_u128)(m - 1) * m * (2 * m - 1) / 6,
		             s->m_sy, s->m_sxy, s->m_syy);
	g.r2 = (double)t.r2;
	g.r2_per_mark = (double)k.r2;
	if (d->ngrowth == d->growth_cap) {
		size_t cap = d->growth_cap ? d->growth_cap * 2 : 16;
		void *p = realloc(d->growth, cap * sizeof(*d->growth));
		if (!p)
			return -ENOMEM;
		d->growth = p;
		d->growth_cap = cap;
	}
	d->growth[d->ngrowth++] = g;
	return 0;
}

static int cmp_growth(const void *a, const void *b)
{
	const struct mt_growth *x = a, *y = b;

	if (x->grown_bytes != y->grown_bytes)
		return x->grown_bytes > y->grown_bytes ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->stack_instance != y->stack_instance)
		return x->stack_instance < y->stack_instance ? -1 : 1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

void mt_growth_sort(struct mt_diagnosis *d)
{
	if (d->ngrowth > 1)
		qsort(d->growth, d->ngrowth, sizeof(*d->growth), cmp_growth);
}
