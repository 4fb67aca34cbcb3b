/* SPDX-License-Identifier: MIT */
/*
 * The stacks' growth between two marks (window.h). At the from-mark every
 * stack's live figures are kept; at the to-mark each stack's are compared
 * with them, and a stack that holds more bytes than then becomes a row with
 * the difference. A stack that shrank offsets nothing: memory freed that was
 * allocated before the window does not hide memory kept inside it.
 *
 * May not: print.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "window.h"

struct figures {
	uint64_t bytes, blocks;
};

static uint64_t stack_key(uint32_t stack_instance, uint32_t stack)
{
	return (uint64_t)stack_instance << 32 | stack;
}

static bool is_label(const struct mt_record *rec, const char *label)
{
	size_t n = strlen(label);

	return rec->u.mark.label.len == n && !memcmp(rec->u.mark.label.data, label, n);
}

static int keep_from(void *ctx, const struct mt_stack_stats *s)
{
	struct mt_window_proc *p = ctx;
	struct figures *f;
	bool created;

	if (!s->live_bytes && !s->live_blocks)
		return 0;
	if (!(f = mt_map_put(&p->at_from[s->kind], stack_key(s->stack_instance, s->stack),
	                     &created)))
		return -ENOMEM;
	f->bytes = s->live_bytes;
	f->blocks = s->live_blocks;
	return 0;
}

static int add_grown(void *ctx, const struct mt_stack_stats *s)
{
	struct mt_window_proc *p = ctx;
	const struct figures *f =
	        mt_map_get(&p->at_from[s->kind], stack_key(s->stack_instance, s->stack));
	uint64_t bytes = f ? f->bytes : 0, blocks = f ? f->blocks : 0;
	struct mt_stack_row *row, *rows;

	size_t n = p->nrows[s->kind];

	if (s->live_bytes <= bytes)
		return 0;
	/* the array doubles each time its count reaches a power of two */
	if (!(n & (n - 1))) {
		rows = realloc(p->rows[s->kind], (n ? 2 * n : 1) * sizeof(*rows));
		if (!rows)
			return -ENOMEM;
		p->rows[s->kind] = rows;
	}
	row = &p->rows[s->kind][p->nrows[s->kind]++];
	*row = (struct mt_stack_row){.stack = s->stack, .stack_instance = s->stack_instance};
	row->leaked_bytes = s->live_bytes - bytes;
	row->leaked_blocks = s->live_blocks > blocks ? s->live_blocks - blocks : 0;
	/* reach NULL: all of it unclassified */
	return 0;
}

static struct mt_window_proc *find(struct mt_window *w, uint32_t instance)
{
	for (uint32_t i = 0; i < w->nprocs; i++)
		if (w->procs[i].instance == instance)
			return &w->procs[i];
	return NULL;
}

static struct mt_window_proc *open_proc(struct mt_window *w, uint32_t instance)
{
	struct mt_window_proc *procs = realloc(w->procs, (w->nprocs + 1) * sizeof(*procs)), *p;

	if (!procs)
		return NULL;
	w->procs = procs;
	p = &procs[w->nprocs++];
	*p = (struct mt_window_proc){.instance = instance};
	for (int k = 0; k < MT_KIND_COUNT; k++)
		mt_map_init(&p->at_from[k], sizeof(struct figures));
	return p;
}

int mt_window_record(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
                     const struct mt_record *rec)
{
	struct mt_window *w = ctx;
	struct mt_window_proc *p = find(w, in->id);
	int r;

	if (rec->type != MT_REC_MARK)
		return 0;
	/* the to-mark first: with one label for both, its first mark opens and the next closes */
	if (p && !p->closed && is_label(rec, w->to)) {
		p->closed = true;
		p->to_time = rec->time;
		r = mt_replay_foreach_stack(a->replay, in, add_grown, p);
		for (int k = 0; k < MT_KIND_COUNT; k++)
			mt_map_free(&p->at_from[k]);
		return r;
	}
	if (p || !is_label(rec, w->from))
		return 0;
	if (!(p = open_proc(w, in->id)))
		return -ENOMEM;
	p->from_time = rec->time;
	return mt_replay_foreach_stack(a->replay, in, keep_from, p);
}

const struct mt_window_proc *mt_window_find(const struct mt_window *w, uint32_t instance)
{
	return find((struct mt_window *)w, instance);
}

void mt_window_free(struct mt_window *w)
{
	for (uint32_t i = 0; i < w->nprocs; i++)
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			mt_map_free(&w->procs[i].at_from[k]);
			free(w->procs[i].rows[k]);
		}
	free(w->procs);
	w->procs = NULL;
	w->nprocs = 0;
}
