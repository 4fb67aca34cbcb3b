/* SPDX-License-Identifier: MIT */
/*
 * Traces side by side (ranks.h). The stacks are matched by their frames as
 * text, so that the same line of the same program is one row whatever its
 * stack ids in each trace; a group of Python stacks (docs/python.md) by its
 * group's frames.
 *
 * May not: print.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ranks.h"

#define MAX_FRAMES 512

int mt_ranks_init(struct mt_ranks *r, uint32_t cap)
{
	*r = (struct mt_ranks){.cap = cap};
	r->rank = calloc(cap ? cap : 1, sizeof(*r->rank));
	mt_map_init(&r->index, sizeof(size_t));
	return r->rank ? 0 : -ENOMEM;
}

static uint64_t hash_key(enum mt_kind kind, const char *key)
{
	uint64_t h = 14695981039346656037u ^ (uint64_t)kind;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211u;
	return h;
}

/* all count frames as text, a line each; NULL without memory */
static char *frames_key(const struct mt_sym *syms, int count)
{
	size_t size = 256, at = 0;
	char *key = malloc(size), line[1024];

	for (int i = 0; key && i < count; i++) {
		size_t n;
		mt_cmd_frame_text(line, sizeof(line), &syms[i]);
		n = strlen(line);
		if (at + n + 2 > size) {
			char *more;
			while (at + n + 2 > size)
				size *= 2;
			if (!(more = realloc(key, size))) {
				free(key);
				return NULL;
			}
			key = more;
		}
		memcpy(key + at, line, n);
		at += n;
		key[at++] = '\n';
	}
	if (key)
		key[at] = 0;
	return key;
}

/* The row of (kind, frames) for rank `rank`, made when new. */
static int add_stack(struct mt_ranks *r, uint32_t rank, enum mt_kind kind,
                     const struct mt_sym *syms, int count, uint64_t peak)
{
	char *key = frames_key(syms, count), label[1024];
	bool created;
	size_t *slot;
	struct mt_rank_stack *s;

	if (!key)
		return -ENOMEM;
	if (!(slot = mt_map_put(&r->index, hash_key(kind, key), &created))) {
		free(key);
		return -ENOMEM;
	}
	if (!created) {
		/* a 64-bit hash of the frames: two different stacks share one with odds of
		 * ~n^2/2^65 */
		r->stacks[*slot - 1].peak[rank] += peak;
		free(key);
		return 0;
	}
	/* the array doubles each time its count reaches a power of two */
	if (!(r->nstacks & (r->nstacks - 1))) {
		struct mt_rank_stack *more =
		        realloc(r->stacks, (r->nstacks ? 2 * r->nstacks : 1) * sizeof(*more));
		if (!more)
			goto nomem;
		r->stacks = more;
	}
	s = &r->stacks[r->nstacks];
	mt_cmd_label_text(label, sizeof(label), syms, count);
	*s = (struct mt_rank_stack){.kind = kind,
	                            .key = key,
	                            .label = strdup(label),
	                            .peak = calloc(r->cap, sizeof(uint64_t))};
	if (!s->label || !s->peak) {
		free(s->label);
		free(s->peak);
		goto nomem;
	}
	s->peak[rank] = peak;
	*slot = ++r->nstacks;
	return 0;
nomem:
	mt_map_del(&r->index, hash_key(kind, key));
	free(key);
	return -ENOMEM;
}

/* The trace's first trouble: its earliest failed allocation or killed process. */
static void find_trouble(struct mt_analysis *a, struct mt_rank *rank)
{
	for (uint32_t i = 0; i < a->nprocs; i++) {
		const struct mt_process_result *p = &a->procs[i];
		const struct mt_instance *in = p->in;
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			const struct mt_kind_result *kr = &p->kind[k];
			uint64_t t;
			if (!kr->nfails)
				continue;
			t = in->realtime + mt_analysis_since_start(a, in, kr->fails[0].event.time);
			if (rank->trouble.any && t >= rank->trouble.realtime_ns)
				continue;
			rank->trouble =
			        (struct mt_rank_trouble){.any = true,
			                                 .realtime_ns = t,
			                                 .pid = in->pid,
			                                 .live_bytes = kr->fails[0].live_bytes,
			                                 .fail = kr->fails[0].event};
		}
		if (in->end == MT_END_KILLED) {
			uint64_t t = in->realtime + mt_analysis_since_start(a, in, in->end_time);
			if (!rank->trouble.any || t < rank->trouble.realtime_ns)
				rank->trouble = (struct mt_rank_trouble){
				        .any = true,
				        .killed = true,
				        .realtime_ns = t,
				        .pid = in->pid,
				        .live_bytes = p->kind[MT_KIND_HOST].leaked_bytes};
		}
	}
}

int mt_ranks_add(struct mt_ranks *r, struct mt_analysis *a, const char *file)
{
	struct mt_rank *rank;
	struct mt_sym *syms;
	const struct mt_process_result *root;
	int ret = 0;

	if (r->n == r->cap || !a->nprocs)
		return -EINVAL;
	root = &a->procs[0];
	rank = &r->rank[r->n];
	*rank = (struct mt_rank){.file = file,
	                         .pid = root->in->pid,
	                         .processes = a->nprocs,
	                         .end = root->in->end,
	                         .exit_status = root->in->exit_status,
	                         .start_realtime_ns = root->in->realtime,
	                         .sampling = root->in->sampling};
	if (!(rank->command = strdup(mt_cmd_command(root->in))))
		return -ENOMEM;
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		rank->kind[k] = root->kind[k].stats;
		rank->shown[k] = mt_kind_shown(root->in, (unsigned)k);
		for (uint32_t i = 0; i < a->nprocs; i++)
			rank->failed[k] += a->procs[i].kind[k].stats.failed;
	}
	find_trouble(a, rank);
	if (rank->trouble.any) {
		for (uint32_t i = 0; i < a->nprocs; i++)
			if (a->procs[i].in->pid == rank->trouble.pid)
				rank->trouble.command = strdup(mt_cmd_command(a->procs[i].in));
	}
	if (!(syms = calloc(MAX_FRAMES, sizeof(*syms))))
		return -ENOMEM;
	for (int k = 0; k < MT_KIND_COUNT && !ret; k++) {
		const struct mt_kind_result *kr = &root->kind[k];
		for (size_t i = 0; i < kr->nrows && !ret; i++) {
			const struct mt_stack_row *row = &kr->rows[i];
			int n;
			if (!row->peak_bytes)
				continue;
			n = mt_analysis_frames(a, row->stack_instance, row->stack, syms,
			                       MAX_FRAMES);
			if (n > 0)
				ret = add_stack(r, r->n, (enum mt_kind)k, syms, n, row->peak_bytes);
		}
	}
	free(syms);
	r->n++;
	return ret;
}

static int by_spread(const void *x, const void *y)
{
	const struct mt_rank_stack *a = x, *b = y;

	if (a->spread != b->spread)
		return a->spread < b->spread ? 1 : -1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return strcmp(a->key, b->key);
}

void mt_ranks_finish(struct mt_ranks *r)
{
	for (size_t i = 0; i < r->nstacks; i++) {
		struct mt_rank_stack *s = &r->stacks[i];
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint32_t k = 0; k < r->n; k++) {
			lo = s->peak[k] < lo ? s->peak[k] : lo;
			hi = s->peak[k] > hi ? s->peak[k] : hi;
		}
		s->spread = r->n ? hi - lo : 0;
	}
	qsort(r->stacks, r->nstacks, sizeof(*r->stacks), by_spread);
	mt_map_free(&r->index); /* its indexes are stale once sorted */
}

void mt_ranks_free(struct mt_ranks *r)
{
	for (uint32_t i = 0; i < r->n; i++) {
		free(r->rank[i].command);
		free((char *)r->rank[i].trouble.command);
	}
	for (size_t i = 0; i < r->nstacks; i++) {
		free(r->stacks[i].key);
		free(r->stacks[i].label);
		free(r->stacks[i].peak);
	}
	free(r->rank);
	free(r->stacks);
	mt_map_free(&r->index);
}

uint32_t mt_ranks_trouble_order(const struct mt_ranks *r, uint32_t *order)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->n; i++) {
		uint32_t j = n++;
		if (!r->rank[i].trouble.any) {
			n--;
			continue;
		}
		/* insertion by time: a job's traces number in the thousands at most */
		while (j > 0 &&
		       r->rank[order[j - 1]].trouble.realtime_ns > r->rank[i].trouble.realtime_ns) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	return n;
}

uint64_t mt_ranks_start(const struct mt_ranks *r)
{
	uint64_t start = UINT64_MAX;

	for (uint32_t i = 0; i < r->n; i++)
		if (r->rank[i].start_realtime_ns < start)
			start = r->rank[i].start_realtime_ns;
	return r->n ? start : 0;
}
