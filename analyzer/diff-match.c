/* SPDX-License-Identifier: MIT */
/*
 * Matching two traces' stacks (diff-match.h). Every row of every process
 * of both traces becomes an entry: its program and kind (a group), the
 * text its frames are known by (the key), its figures and the trace it
 * came from. Sorted by group and key, entries with the same both are one
 * stack: summed per trace, shown from NEW's when NEW has it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff-match.h"
#include "grow.h"

#define MAX_FRAMES 512

struct entry {
	char *key; /* the frames' names; NULL for [no stack] */
	uint32_t group;
	int side;
	struct mt_diff_figures f;
	struct mt_analysis *a;
	uint32_t stack_instance, stack;
};

/* A group as it is gathered: its totals and what its stacks add up to, per trace. */
struct gather {
	char *program;
	enum mt_kind kind;
	struct mt_diff_figures total[2], rows[2];
	uint32_t processes[2];
};

struct builder {
	struct entry *v;
	size_t n, cap;
	struct gather *g;
	uint32_t ng, gcap;
	char *key;
	size_t key_n, key_cap;
	struct mt_sym *syms;
	enum mt_diff_lines lines;
	const bool *counted;
};

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static int key_put(struct builder *b, const char *s, size_t len)
{
	if (mt_grow((void **)&b->key, &b->key_cap, b->key_n + len + 1, 1) < 0)
		return -ENOMEM;
	memcpy(b->key + b->key_n, s, len);
	b->key_n += len;
	b->key[b->key_n] = 0;
	return 0;
}

static int key_str(struct builder *b, const char *s)
{
	return key_put(b, s, strlen(s));
}

/* A frame's name in a key: function, file and maybe line, fields apart by \x1f. */
static int key_frame(struct builder *b, const struct mt_sym *s)
{
	bool python = s->module && !strcmp(s->module, "python");
	char num[64];
	int r = 0;

	if (s->function) {
		r = key_str(b, s->function);
	} else if (s->module) {
		snprintf(num, sizeof(num), "+0x%" PRIx64, s->offset);
		r = key_str(b, base_name(s->module)) || key_str(b, num);
	} else {
		snprintf(num, sizeof(num), "0x%" PRIx64, s->address);
		r = key_str(b, num);
	}
	r = r || key_put(b, "\x1f", 1) || key_str(b, s->file ? base_name(s->file) : "");
	if (b->lines == MT_DIFF_LINES_ALL || (b->lines == MT_DIFF_LINES_PYTHON && python)) {
		snprintf(num, sizeof(num), "\x1f%" PRIu32, s->line);
		r = r || key_str(b, num);
	}
	if (s->tail)
		r = r || key_put(b, "\x1f", 1) || key_str(b, s->tail);
	return r || key_put(b, "\x1e", 1) ? -ENOMEM : 0;
}

static const char *program_of(const struct mt_instance *in)
{
	const char *cmd;

	if (in->exe && in->exe[0])
		return base_name(in->exe);
	cmd = in->cmdline && in->cmdline[0] ? in->cmdline : "?";
	return base_name(cmd);
}

static int64_t group_of(struct builder *b, const char *program, size_t len, enum mt_kind kind)
{
	size_t cap = b->gcap;

	for (uint32_t i = 0; i < b->ng; i++)
		if (b->g[i].kind == kind && strlen(b->g[i].program) == len &&
		    !memcmp(b->g[i].program, program, len))
			return i;
	if (mt_grow((void **)&b->g, &cap, (size_t)b->ng + 1, sizeof(*b->g)) < 0)
		return -ENOMEM;
	b->gcap = (uint32_t)cap;
	memset(&b->g[b->ng], 0, sizeof(*b->g));
	if (!(b->g[b->ng].program = strndup(program, len)))
		return -ENOMEM;
	b->g[b->ng].kind = kind;
	return b->ng++;
}

static void add_figures(struct mt_diff_figures *to, const struct mt_diff_figures *f)
{
	to->peak_bytes += f->peak_bytes;
	to->leaked_bytes += f->leaked_bytes;
	to->bytes_allocated += f->bytes_allocated;
	to->allocations += f->allocations;
}

static int add_entry(struct builder *b, const struct entry *e)
{
	if (mt_grow((void **)&b->v, &b->cap, b->n + 1, sizeof(*b->v)) < 0)
		return -ENOMEM;
	b->v[b->n++] = *e;
	return 0;
}

/* A row of a process: its key made of its frames. */
static int add_row(struct builder *b, struct mt_analysis *a, int side, uint32_t group,
                   const struct mt_stack_row *row)
{
	struct entry e = {.group = group,
	                  .side = side,
	                  .a = a,
	                  .stack_instance = row->stack_instance,
	                  .stack = row->stack};
	int n = mt_analysis_frames(a, row->stack_instance, row->stack, b->syms, MAX_FRAMES), r;

	if (n < 0)
		return n;
	e.f = (struct mt_diff_figures){row->peak_bytes, 0, row->bytes_allocated, row->allocations};
	for (int c = 0; c < MT_LEAK_CLASS_COUNT; c++)
		if (b->counted[c])
			e.f.leaked_bytes += mt_stack_row_reach(row, (enum mt_leak_class)c).bytes;
	if (!(e.f.peak_bytes | e.f.leaked_bytes | e.f.bytes_allocated | e.f.allocations))
		return 0;
	add_figures(&b->g[group].rows[side], &e.f);
	b->key_n = 0;
	if ((r = key_str(b, "")) < 0)
		return r;
	for (int i = n - 1; i >= 0; i--)
		if ((r = key_frame(b, &b->syms[i])) < 0)
			return r;
	/* no frame at all is no stack: it is shown and matched as [no stack] */
	if (n > 0 && !(e.key = strdup(b->key)))
		return -ENOMEM;
	if (!n)
		e.a = NULL;
	if ((r = add_entry(b, &e)) < 0)
		free(e.key);
	return r;
}

static int add_trace(struct builder *b, struct mt_analysis *a, int side)
{
	for (uint32_t i = 0; i < a->nprocs; i++) {
		const struct mt_process_result *p = &a->procs[i];
		const char *program = program_of(p->in);
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			const struct mt_kind_result *kr = &p->kind[k];
			struct mt_diff_figures total = {kr->stats.peak_bytes, 0,
			                                kr->stats.bytes_allocated,
			                                kr->stats.allocations};
			int64_t g;
			int r;
			if (!mt_kind_shown(p->in, (unsigned)k))
				continue;
			if ((g = group_of(b, program, strlen(program), (enum mt_kind)k)) < 0)
				return (int)g;
			for (int c = 0; c < MT_LEAK_CLASS_COUNT; c++)
				if (b->counted[c])
					total.leaked_bytes += kr->leak_kinds[c].bytes;
			add_figures(&b->g[g].total[side], &total);
			b->g[g].processes[side]++;
			for (size_t j = 0; j < kr->nrows; j++)
				if ((r = add_row(b, a, side, (uint32_t)g, &kr->rows[j])) < 0)
					return r;
		}
	}
	return 0;
}

static uint64_t rest(uint64_t total, uint64_t rows)
{
	return total > rows ? total - rows : 0;
}

/* What a group's stacks leave of its figures, as [no stack] (no key, no analysis). */
static int add_rests(struct builder *b)
{
	for (uint32_t g = 0; g < b->ng; g++) {
		for (int side = 0; side < 2; side++) {
			const struct mt_diff_figures *t = &b->g[g].total[side],
			                             *r = &b->g[g].rows[side];
			struct entry e = {.group = g, .side = side};
			e.f = (struct mt_diff_figures){rest(t->peak_bytes, r->peak_bytes),
			                               rest(t->leaked_bytes, r->leaked_bytes),
			                               rest(t->bytes_allocated, r->bytes_allocated),
			                               rest(t->allocations, r->allocations)};
			if ((e.f.peak_bytes | e.f.leaked_bytes | e.f.bytes_allocated |
			     e.f.allocations) &&
			    add_entry(b, &e) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

static int cmp_key(const char *x, const char *y)
{
	if (!x || !y)
		return (x != NULL) - (y != NULL);
	return strcmp(x, y);
}

static int cmp_entry(const void *pa, const void *pb)
{
	const struct entry *x = pa, *y = pb;

	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return cmp_key(x->key, y->key);
}

static const struct gather *sorting;

/* Groups by program, then kind. */
static int cmp_group(const void *pa, const void *pb)
{
	const struct gather *x = &sorting[*(const uint32_t *)pa],
	                    *y = &sorting[*(const uint32_t *)pb];
	int c = strcmp(x->program, y->program);

	return c ? c : (x->kind > y->kind) - (x->kind < y->kind);
}

/* The sorted entries into d's groups and stacks: equal keys of one group are one stack. */
static int assemble(struct builder *b, struct mt_diff *d)
{
	uint32_t *order = malloc((b->ng ? b->ng : 1) * sizeof(*order)), *place;

	place = malloc((b->ng ? b->ng : 1) * sizeof(*place));
	d->groups = calloc(b->ng ? b->ng : 1, sizeof(*d->groups));
	if (!order || !place || !d->groups) {
		free(order);
		free(place);
		return -ENOMEM;
	}
	for (uint32_t g = 0; g < b->ng; g++)
		order[g] = g;
	sorting = b->g;
	qsort(order, b->ng, sizeof(*order), cmp_group);
	for (uint32_t g = 0; g < b->ng; g++) {
		struct mt_diff_group *dg = &d->groups[g];
		const struct gather *src = &b->g[order[g]];
		place[order[g]] = g;
		dg->program = src->program;
		b->g[order[g]].program = NULL; /* d owns it now */
		dg->kind = src->kind;
		memcpy(dg->total, src->total, sizeof(dg->total));
		memcpy(dg->processes, src->processes, sizeof(dg->processes));
	}
	d->ngroups = b->ng;
	free(order);
	/* the stacks each group gets, then the stacks */
	for (size_t i = 0, j; i < b->n; i = j) {
		for (j = i; j < b->n && !cmp_entry(&b->v[i], &b->v[j]); j++)
			;
		d->groups[place[b->v[i].group]].nstacks++;
	}
	for (uint32_t g = 0; g < b->ng; g++) {
		struct mt_diff_group *dg = &d->groups[g];
		if (!(dg->stacks = calloc(dg->nstacks ? dg->nstacks : 1, sizeof(*dg->stacks)))) {
			free(place);
			return -ENOMEM;
		}
		dg->nstacks = 0;
	}
	for (size_t i = 0, j; i < b->n; i = j) {
		struct mt_diff_group *dg = &d->groups[place[b->v[i].group]];
		struct mt_diff_stack *s = &dg->stacks[dg->nstacks++];
		for (j = i; j < b->n && !cmp_entry(&b->v[i], &b->v[j]); j++) {
			const struct entry *e = &b->v[j];
			add_figures(&s->side[e->side], &e->f);
			s->in[e->side] = true;
			if (j == i || e->side == MT_DIFF_NEW) {
				s->a = e->a;
				s->stack_instance = e->stack_instance;
				s->stack = e->stack;
			}
		}
	}
	free(place);
	return 0;
}

int mt_diff_build(struct mt_diff *d, struct mt_analysis *base, struct mt_analysis *new_,
                  enum mt_diff_lines lines, const bool counted[MT_LEAK_CLASS_COUNT])
{
	struct builder b = {.lines = lines, .counted = counted};
	int r = -ENOMEM;

	memset(d, 0, sizeof(*d));
	b.syms = calloc(MAX_FRAMES, sizeof(*b.syms));
	if (!b.syms)
		goto out;
	if ((r = add_trace(&b, base, MT_DIFF_BASE)) < 0 ||
	    (r = add_trace(&b, new_, MT_DIFF_NEW)) < 0 || (r = add_rests(&b)) < 0)
		goto out;
	if (b.n > 1)
		qsort(b.v, b.n, sizeof(*b.v), cmp_entry);
	r = assemble(&b, d);
out:
	for (size_t i = 0; i < b.n; i++)
		free(b.v[i].key);
	for (uint32_t g = 0; g < b.ng; g++)
		free(b.g[g].program);
	free(b.v);
	free(b.g);
	free(b.key);
	free(b.syms);
	if (r < 0)
		mt_diff_free(d);
	return r;
}

void mt_diff_free(struct mt_diff *d)
{
	for (size_t g = 0; g < d->ngroups; g++) {
		free(d->groups[g].program);
		free(d->groups[g].stacks);
	}
	free(d->groups);
	memset(d, 0, sizeof(*d));
}
