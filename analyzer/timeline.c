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
	uint64_t span = in->end_time > start ? in->end_time - start + 1 : 1;

	p->in = in;
	p->start = start;
	p->nbuckets = span < MT_TIMELINE_BUCKETS ? (uint32_t)span : MT_TIMELINE_BUCKETS;
	p->width = (span + p->nbuckets - 1) / p->nbuckets;
	p->next_even = 1;
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

struct snap_build {
	struct mt_snapshot_row *rows; /* every live stack, all kinds */
	size_t n, cap;
	uint8_t *kinds; /* the kind of each row */
};

static int collect(void *ctx, const struct mt_stack_stats *s)
{
	struct snap_build *sb = ctx;

	if (!s->live_bytes && !s->live_blocks)
		return 0;
	if (sb->n == sb->cap) {
		size_t cap = sb->cap ? sb->cap * 2 : 256;
		void *r = realloc(sb->rows, cap * sizeof(*sb->rows));
		void *k = r ? realloc(sb->kinds, cap) : NULL;
		if (r)
			sb->rows = r;
		if (!k)
			return -ENOMEM;
		sb->kinds = k;
		sb->cap = cap;
	}
	sb->rows[sb->n] = (struct mt_snapshot_row){s->stack, s->stack_instance, s->live_bytes,
	                                           s->live_blocks};
	sb->kinds[sb->n++] = (uint8_t)s->kind;
	return 0;
}

static int cmp_rows(const void *a, const void *b)
{
	const struct mt_snapshot_row *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	if (x->stack_instance != y->stack_instance)
		return x->stack_instance < y->stack_instance ? -1 : 1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static int snapshot(struct mt_timeline_proc *p, struct mt_analysis *a, const struct mt_instance *in,
                    uint64_t time, uint64_t until, enum mt_snapshot_why why)
{
	struct snap_build sb = {0};
	struct mt_snapshot *s;
	int r;

	if (p->nsnaps == MT_SNAPSHOTS_MAX)
		return 0;
	if (!p->snaps && !(p->snaps = calloc(MT_SNAPSHOTS_MAX, sizeof(*p->snaps))))
		return -ENOMEM;
	r = mt_replay_foreach_stack(a->replay, in, collect, &sb);
	if (r < 0)
		goto out;
	s = &p->snaps[p->nsnaps++];
	s->time = time;
	s->until = until;
	s->why = why;
	for (unsigned k = 0; k < MT_KIND_COUNT; k++) {
		struct mt_snapshot_kind *sk = &s->kind[k];
		size_t n = 0;
		for (size_t i = 0; i < sb.n; i++)
			n += sb.kinds[i] == k;
		if (!n)
			continue;
		sk->rows = malloc(n * sizeof(*sk->rows));
		if (!sk->rows) {
			r = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < sb.n; i++)
			if (sb.kinds[i] == k)
				sk->rows[sk->nrows++] = sb.rows[i];
		qsort(sk->rows, n, sizeof(*sk->rows), cmp_rows);
		for (size_t i = MT_SNAPSHOT_STACKS; i < n; i++) {
			sk->rest_stacks++;
			sk->rest_bytes += sk->rows[i].bytes;
			sk->rest_blocks += sk->rows[i].blocks;
		}
		if (n > MT_SNAPSHOT_STACKS)
			sk->nrows = MT_SNAPSHOT_STACKS;
	}
out:
	free(sb.rows);
	free(sb.kinds);
	return r;
}

/* The evenly spaced moment number i (1..MT_SNAPSHOTS_EVEN), in ticks. */
static uint64_t even_time(const struct mt_timeline_proc *p, uint32_t i)
{
	return p->start + (uint64_t)((double)p->width * p->nbuckets * i / MT_SNAPSHOTS_EVEN);
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
	int r;

	/* only events change the live set */
	if (!mt_record_is_event(rec->type))
		return 0;
	if (!(p = proc_of(ctx, a, in, time, &r)))
		return r;
	if (p->next_even > MT_SNAPSHOTS_EVEN || time < (at = even_time(p, p->next_even)))
		return 0;
	/* the moments this event is at or after all had the live set as it is now */
	while (p->next_even <= MT_SNAPSHOTS_EVEN && time >= even_time(p, p->next_even))
		p->next_even++;
	return snapshot(p, a, in, at, time, MT_SNAPSHOT_TIME);
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

void mt_timeline_finish(struct mt_timeline *t)
{
	for (uint32_t i = 0; i < t->nprocs; i++) {
		struct mt_timeline_proc *p = &t->procs[i];
		for (unsigned k = 0; p->in && k < MT_KIND_COUNT; k++)
			if (p->live[k])
				kind_fill(p, k, p->nbuckets);
	}
}

void mt_timeline_free(struct mt_timeline *t)
{
	for (uint32_t i = 0; i < t->nprocs; i++) {
		struct mt_timeline_proc *p = &t->procs[i];
		for (unsigned k = 0; k < MT_KIND_COUNT; k++)
			free(p->live[k]);
		for (uint32_t s = 0; s < p->nsnaps; s++)
			for (unsigned k = 0; k < MT_KIND_COUNT; k++)
				free(p->snaps[s].kind[k].rows);
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
