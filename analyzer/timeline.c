/* SPDX-License-Identifier: MIT */
/*
 * Memory over time for the viewer (see timeline.h). A kind's buckets are
 * written lazily: when the kind changes in bucket b, the buckets since the
 * last change get the value it held all along, then bucket b its new
 * highest. So an event costs one division and a few stores, and a kind that
 * never changes costs nothing until the end.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"

static int kind_begin(struct mt_timeline_proc *p, unsigned k)
{
	if (p->live[k])
		return 0;
	p->live[k] = calloc(p->nbuckets, sizeof(uint64_t));
	return p->live[k] ? 0 : -ENOMEM;
}

/* Buckets of kind k up to b (exclusive) hold what k held since its last change. */
static void kind_fill(struct mt_timeline_proc *p, unsigned k, uint32_t b)
{
	for (; p->filled[k] < b; p->filled[k]++)
		p->live[k][p->filled[k]] = p->last[k];
}

static int instance_begin(struct mt_timeline_proc *p, const struct mt_instance *in,
                          uint64_t first_time)
{
	uint64_t start = in->have_process ? in->start_time : first_time;
	uint64_t span = in->end_time > start ? in->end_time - start + 1 : 1, neven;

	p->in = in;
	p->start = start;
	p->nbuckets = span < MT_TIMELINE_BUCKETS ? (uint32_t)span : MT_TIMELINE_BUCKETS;
	p->width = (span + p->nbuckets - 1) / p->nbuckets;
	p->next_even = 1;
	/*
	 * A few hundred events need no more moments than they have events to
	 * tell apart; a snapshot walks every stack, so many stacks get fewer.
	 */
	neven = in->events / MT_EVENTS_PER_SNAPSHOT;
	if (in->stack_count && neven > MT_SNAPSHOT_WALK / in->stack_count)
		neven = MT_SNAPSHOT_WALK / in->stack_count;
	p->neven = neven < 4 ? 4 : neven > MT_SNAPSHOTS_EVEN ? MT_SNAPSHOTS_EVEN : (uint32_t)neven;
	for (unsigned k = 0; k < MT_KIND_COUNT; k++) {
		/* a forked child starts with its parent's blocks */
		p->last[k] = in->kind[k].inherited_bytes;
		if ((k <= MT_KIND_MMAP || p->last[k]) && kind_begin(p, k) < 0)
			return -ENOMEM;
	}
	return 0;
}

static uint32_t bucket_of(const struct mt_timeline_proc *p, uint64_t time)
{
	uint64_t b = time > p->start ? (time - p->start) / p->width : 0;

	return b < p->nbuckets ? (uint32_t)b : p->nbuckets - 1;
}

static int kind_changed(struct mt_timeline_proc *p, const struct mt_instance *in, unsigned k,
                        uint32_t b)
{
	if (kind_begin(p, k) < 0)
		return -ENOMEM;
	kind_fill(p, k, b);
	if (p->filled[k] == b) {
		/* the bucket starts with what the kind held before this event */
		p->live[k][b] = p->last[k];
		p->filled[k] = b + 1;
	}
	p->last[k] = in->kind[k].live_bytes;
	if (p->last[k] > p->live[k][b])
		p->live[k][b] = p->last[k];
	return 0;
}

/* ---- snapshots ---- */

/*
 * A snapshot is made in one walk over the instance's stacks: each kind
 * keeps its MT_SNAPSHOT_STACKS largest in a min-heap by bytes (the smallest
 * on top, to be pushed out into the rest), so a walk over many stacks costs
 * O(stacks log MT_SNAPSHOT_STACKS).
 */
static bool smaller(const struct mt_snapshot_row *x, const struct mt_snapshot_row *y)
{
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes;
	if (x->stack_instance != y->stack_instance)
		return x->stack_instance > y->stack_instance;
	return x->stack > y->stack;
}

static void sift_down(struct mt_snapshot_row *h, uint32_t n, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, m = i;
		struct mt_snapshot_row t;
		if (l < n && smaller(&h[l], &h[m]))
			m = l;
		if (l + 1 < n && smaller(&h[l + 1], &h[m]))
			m = l + 1;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void sift_up(struct mt_snapshot_row *h, uint32_t i)
{
	while (i > 0 && smaller(&h[i], &h[(i - 1) / 2])) {
		struct mt_snapshot_row t = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static void add_to_rest(struct mt_snapshot_kind *sk, const struct mt_snapshot_row *row)
{
	sk->rest_stacks++;
	sk->rest_bytes += row->bytes;
	sk->rest_blocks += row->blocks;
}

static int collect(void *ctx, const struct mt_stack_stats *st)
{
	struct mt_snapshot *s = ctx;
	struct mt_snapshot_kind *sk = &s->kind[st->kind];
	struct mt_snapshot_row row = {st->stack, st->stack_instance, st->live_bytes,
	                              st->live_blocks};

	if (!st->live_bytes && !st->live_blocks)
		return 0;
	if (!sk->rows && !(sk->rows = malloc(MT_SNAPSHOT_STACKS * sizeof(*sk->rows))))
		return -ENOMEM;
	if (sk->nrows < MT_SNAPSHOT_STACKS) {
		sk->rows[sk->nrows] = row;
		sift_up(sk->rows, sk->nrows++);
	} else if (smaller(&sk->rows[0], &row)) {
		add_to_rest(sk, &sk->rows[0]);
		sk->rows[0] = row;
		sift_down(sk->rows, sk->nrows, 0);
	} else {
		add_to_rest(sk, &row);
	}
	return 0;
}

static int cmp_rows(const void *a, const void *b)
{
	const struct mt_snapshot_row *x = a, *y = b;

	return smaller(y, x) ? -1 : smaller(x, y);
}

static void snapshot_free(struct mt_snapshot *s)
{
	for (unsigned k = 0; k < MT_KIND_COUNT; k++)
		free(s->kind[k].rows);
	memset(s, 0, sizeof(*s));
}

static int snapshot(struct mt_timeline_proc *p, struct mt_analysis *a, const struct mt_instance *in,
                    uint64_t time, uint64_t until, enum mt_snapshot_why why)
{
	struct mt_snapshot *s;
	int r;

	if (p->nsnaps == MT_SNAPSHOTS_MAX)
		return 0;
	if (!p->snaps && !(p->snaps = calloc(MT_SNAPSHOTS_MAX, sizeof(*p->snaps))))
		return -ENOMEM;
	s = &p->snaps[p->nsnaps];
	r = mt_replay_foreach_stack(a->replay, in, collect, s);
	if (r < 0) {
		snapshot_free(s);
		return r;
	}
	for (unsigned k = 0; k < MT_KIND_COUNT; k++)
		if (s->kind[k].nrows > 1)
			qsort(s->kind[k].rows, s->kind[k].nrows, sizeof(struct mt_snapshot_row),
			      cmp_rows);
	s->time = time;
	s->until = until;
	s->why = why;
	p->nsnaps++;
	return 0;
}

/* The evenly spaced moment number i (1..p->neven), in ticks. */
static uint64_t even_time(const struct mt_timeline_proc *p, uint32_t i)
{
	return p->start + (uint64_t)((double)p->width * p->nbuckets * i / p->neven);
}

/* ---- the hook ---- */

static int kinds_changed(struct mt_timeline_proc *p, const struct mt_instance *in,
                         const struct mt_record *rec, uint32_t b)
{
	int r = 0;

	switch (rec->type) {
	case MT_REC_ALLOC:
		return kind_changed(p, in, (unsigned)rec->u.alloc.kind, b);
	case MT_REC_FREE:
		if (rec->u.free.fn < MT_FN_CUDA_MALLOC)
			return kind_changed(p, in, (unsigned)rec->u.free.kind, b);
		/* a CUDA free does not say which device the block was on */
		for (unsigned k = MT_KIND_CUDA_HOST; k < MT_KIND_COUNT && r == 0; k++)
			if (p->live[k] || in->kind[k].live_bytes != p->last[k])
				r = kind_changed(p, in, k, b);
		return r;
	case MT_REC_REALLOC:
		return kind_changed(p, in, MT_KIND_HOST, b);
	case MT_REC_MMAP:
	case MT_REC_MUNMAP:
	case MT_REC_MREMAP:
		return kind_changed(p, in, MT_KIND_MMAP, b);
	default:
		return 0;
	}
}

/* The instance's state in t, begun at its first record. */
static struct mt_timeline_proc *proc_of(struct mt_timeline *t, struct mt_analysis *a,
                                        const struct mt_instance *in, uint64_t time, int *err)
{
	struct mt_timeline_proc *p;

	*err = 0;
	if (!t->procs) {
		t->nprocs = a->nprocs;
		t->procs = calloc(a->nprocs ? a->nprocs : 1, sizeof(*t->procs));
		if (!t->procs) {
			*err = -ENOMEM;
			return NULL;
		}
	}
	p = &t->procs[in - mt_replay_instance(a->replay, 0)];
	if (!p->in && (*err = instance_begin(p, in, time)) < 0)
		return NULL;
	return p;
}

int mt_timeline_before(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
                       const struct mt_record *rec, uint64_t time)
{
	struct mt_timeline_proc *p;
	uint64_t at;
	bool quiet;
	int r = 0;

	/* only events change the live set */
	if (!mt_record_is_event(rec->type))
		return 0;
	if (!(p = proc_of(ctx, a, in, time, &r)))
		return r;
	/* a stretch with no event, wide enough to be clicked on: its live set is the one now */
	quiet = p->had_event && time - p->last_event >= p->width * p->nbuckets / MT_QUIET_FRACTION;
	if (quiet)
		r = snapshot(p, a, in, p->last_event, time, MT_SNAPSHOT_TIME);
	p->last_event = time;
	p->had_event = true;
	if (r < 0 || p->next_even > p->neven || time < (at = even_time(p, p->next_even)))
		return r;
	/* the moments this event is at or after all had the live set as it is now */
	while (p->next_even <= p->neven && time >= even_time(p, p->next_even))
		p->next_even++;
	return quiet ? 0 : snapshot(p, a, in, at, time, MT_SNAPSHOT_TIME);
}

int mt_timeline_record(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
                       const struct mt_record *rec)
{
	struct mt_timeline_proc *p;
	int r;

	if (!(p = proc_of(ctx, a, in, rec->time, &r)))
		return r;
	if (rec->type == MT_REC_MARK)
		return snapshot(p, a, in, rec->time, rec->time, MT_SNAPSHOT_MARK);
	if (!mt_record_is_event(rec->type))
		return 0;
	if ((r = kinds_changed(p, in, rec, bucket_of(p, rec->time))) < 0)
		return r;
	if (rec->type == MT_REC_FAIL)
		return snapshot(p, a, in, rec->time, rec->time, MT_SNAPSHOT_FAIL);
	return 0;
}

/* A quiet stretch's snapshot is made at its end: after the marks within it. */
static int cmp_snapshots(const void *a, const void *b)
{
	const struct mt_snapshot *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->until < y->until ? -1 : x->until > y->until;
}

void mt_timeline_finish(struct mt_timeline *t)
{
	for (uint32_t i = 0; i < t->nprocs; i++) {
		struct mt_timeline_proc *p = &t->procs[i];
		for (unsigned k = 0; p->in && k < MT_KIND_COUNT; k++)
			if (p->live[k])
				kind_fill(p, k, p->nbuckets);
		if (p->nsnaps > 1)
			qsort(p->snaps, p->nsnaps, sizeof(*p->snaps), cmp_snapshots);
	}
}

void mt_timeline_free(struct mt_timeline *t)
{
	for (uint32_t i = 0; i < t->nprocs; i++) {
		struct mt_timeline_proc *p = &t->procs[i];
		for (unsigned k = 0; k < MT_KIND_COUNT; k++)
			free(p->live[k]);
		for (uint32_t s = 0; s < p->nsnaps; s++)
			snapshot_free(&p->snaps[s]);
		free(p->snaps);
	}
	free(t->procs);
	memset(t, 0, sizeof(*t));
}

uint64_t mt_timeline_bucket_ns(const struct mt_analysis *a, const struct mt_timeline_proc *p,
                               uint32_t b)
{
	return mt_analysis_since_start(a, p->in, p->start + (uint64_t)b * p->width);
}
