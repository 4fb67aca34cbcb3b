/* SPDX-License-Identifier: MIT */
/*
 * The viewer's data (see view-data.h). Every stack shown is symbolized once
 * and walked outermost first into a tree of frames: node n is the pair
 * (parent node, frame label), node 0 the root, so stacks that share a
 * beginning share its nodes, and a flame graph is a list of
 * (node, value, blocks) triples the page folds into a tree.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "map.h"
#include "report-json.h"
#include "view-data.h"

#define MAX_FRAMES 512
#define NO_STACK   "[no stack]"

struct builder {
	struct mt_analysis *a;
	struct mt_sym *syms;
	json_t *frames; /* labels, by frame index */
	json_t *nodes;  /* parent, frame, parent, frame, ... for nodes 1.. */
	uint32_t nnodes;
	struct mt_map labels;   /* label hash -> frame index (+1, probing on a clash) */
	struct mt_map children; /* parent << 32 | frame -> node */
	struct mt_map stacks;   /* stack_instance << 32 | stack -> node */
};

static uint64_t hash_label(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* The frame index of a label, added when new; -ENOMEM. */
static int64_t frame_of(struct builder *b, const char *label)
{
	uint64_t h = hash_label(label);
	bool created;

	for (;; h++) {
		uint32_t *idx = mt_map_put(&b->labels, h, &created);
		if (!idx)
			return -ENOMEM;
		if (created) {
			*idx = (uint32_t)json_array_size(b->frames);
			/* mt_cmd_frame_text escaped the names in it: valid UTF-8 */
			if (json_array_append_new(b->frames, json_string(label)) < 0)
				return -ENOMEM;
			return *idx;
		}
		if (!strcmp(json_string_value(json_array_get(b->frames, *idx)), label))
			return *idx;
	}
}

static int64_t child_of(struct builder *b, uint32_t parent, uint32_t frame)
{
	bool created;
	uint32_t *node = mt_map_put(&b->children, (uint64_t)parent << 32 | frame, &created);

	if (!node)
		return -ENOMEM;
	if (created) {
		*node = ++b->nnodes;
		if (json_array_append_new(b->nodes, json_integer(parent)) < 0 ||
		    json_array_append_new(b->nodes, json_integer(frame)) < 0)
			return -ENOMEM;
	}
	return *node;
}

/* The node of a stack's innermost frame; -ENOMEM. */
static int64_t node_of(struct builder *b, uint32_t stack_instance, uint32_t stack)
{
	uint64_t key = (uint64_t)stack_instance << 32 | stack;
	uint32_t *memo = mt_map_get(&b->stacks, key);
	char label[1024];
	int64_t node = 0, frame;
	bool created;
	int n;

	if (memo)
		return *memo;
	n = mt_analysis_frames(b->a, stack_instance, stack, b->syms, MAX_FRAMES);
	if (n <= 0) {
		if ((frame = frame_of(b, NO_STACK)) < 0)
			return frame;
		node = child_of(b, 0, (uint32_t)frame);
	}
	for (int i = n - 1; i >= 0 && node >= 0; i--) {
		mt_cmd_frame_text(label, sizeof(label), &b->syms[i]);
		if (b->syms[i].inlined && strlen(label) + 10 < sizeof(label))
			strcat(label, " [inlined]");
		if ((frame = frame_of(b, label)) < 0)
			return frame;
		node = child_of(b, (uint32_t)node, (uint32_t)frame);
	}
	if (node < 0)
		return node;
	memo = mt_map_put(&b->stacks, key, &created);
	if (!memo)
		return -ENOMEM;
	*memo = (uint32_t)node;
	return node;
}

/*
 * The report's stacks as nodes of the tree: every object of it with
 * "stack", "stack_instance" and "frames" gets "node" instead of "frames",
 * which would repeat the same frames in full for every list they are in.
 */
static int report_nodes(struct builder *b, json_t *j)
{
	json_t *st = json_object_get(j, "stack"), *si = json_object_get(j, "stack_instance");
	const char *key;
	json_t *v;
	size_t i;
	int r;

	if (json_is_array(j)) {
		json_array_foreach (j, i, v) {
			if ((r = report_nodes(b, v)) < 0)
				return r;
		}
		return 0;
	}
	if (!json_is_object(j))
		return 0;
	if (json_is_integer(st) && json_is_integer(si) && json_object_get(j, "frames")) {
		int64_t node = node_of(b, (uint32_t)json_integer_value(si),
		                       (uint32_t)json_integer_value(st));
		if (node < 0 || json_object_set_new(j, "node", json_integer(node)) < 0)
			return -ENOMEM;
		json_object_del(j, "frames");
		return 0;
	}
	json_object_foreach (j, key, v) {
		if ((r = report_nodes(b, v)) < 0)
			return r;
	}
	return 0;
}

/* ---- flame graphs ---- */

/* A row of a flame graph as the page reads it: node, value, blocks. */
static int append_row(json_t *rows, uint64_t node, uint64_t bytes, uint64_t blocks)
{
	return json_array_append_new(rows, json_integer((json_int_t)node)) < 0 ||
	                       json_array_append_new(rows, mt_json_u64(bytes)) < 0 ||
	                       json_array_append_new(rows, mt_json_u64(blocks)) < 0
	               ? -ENOMEM
	               : 0;
}

/* The blocks that go with a metric's value: blocks for bytes, the count itself for counts. */
static uint64_t row_blocks(const struct mt_stack_row *r, enum mt_metric m)
{
	switch (m) {
	case MT_METRIC_PEAK:
		return r->peak_blocks;
	case MT_METRIC_LEAKED:
		return r->leaked_blocks;
	case MT_METRIC_ALLOCATED:
		return r->allocations;
	default:
		return mt_stack_row_value(r, m);
	}
}

/* One flame graph: its MT_VIEW_FLAME_STACKS largest stacks and what the rest add up to. */
static json_t *metric_json(struct builder *b, const struct mt_kind_result *k, enum mt_metric m)
{
	size_t n;
	struct mt_stack_row *ranked = mt_cmd_ranked(k, m, &n);
	json_t *o = json_object(), *rows = json_array();
	uint64_t cut_value = 0, cut_blocks = 0;

	if (!ranked || !o || !rows)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		uint64_t value = mt_stack_row_value(&ranked[i], m),
		         blocks = row_blocks(&ranked[i], m);
		int64_t node;
		if (i >= MT_VIEW_FLAME_STACKS) {
			cut_value += value;
			cut_blocks += blocks;
			continue;
		}
		node = node_of(b, ranked[i].stack_instance, ranked[i].stack);
		if (node < 0 || append_row(rows, (uint64_t)node, value, blocks) < 0)
			goto fail;
	}
	free(ranked);
	json_object_set_new(o, "rows", rows);
	json_object_set_new(o, "kept_stacks",
	                    mt_json_u64(n < MT_VIEW_FLAME_STACKS ? n : MT_VIEW_FLAME_STACKS));
	json_object_set_new(o, "total", mt_json_u64(mt_kind_result_total(k, m)));
	json_object_set_new(o, "cut_stacks",
	                    mt_json_u64(n > MT_VIEW_FLAME_STACKS ? n - MT_VIEW_FLAME_STACKS : 0));
	json_object_set_new(o, "cut_value", mt_json_u64(cut_value));
	json_object_set_new(o, "cut_blocks", mt_json_u64(cut_blocks));
	return o;
fail:
	free(ranked);
	json_decref(rows);
	json_decref(o);
	return NULL;
}

static const enum mt_metric flame_metrics[] = {MT_METRIC_PEAK, MT_METRIC_LEAKED,
                                               MT_METRIC_ALLOCATED, MT_METRIC_TEMPORARY};

static json_t *flames_json(struct builder *b, const struct mt_process_result *p)
{
	json_t *o = json_object();

	for (unsigned k = 0; o && k < MT_KIND_COUNT; k++) {
		json_t *ko;
		if (!mt_kind_shown(p->in, k))
			continue;
		ko = json_object();
		if (!ko || json_object_set_new(o, mt_kind_name(k), ko) < 0)
			goto fail;
		for (size_t i = 0; i < sizeof(flame_metrics) / sizeof(flame_metrics[0]); i++) {
			json_t *f = metric_json(b, &p->kind[k], flame_metrics[i]);
			if (!f || json_object_set_new(ko, mt_metric_name(flame_metrics[i]), f) < 0)
				goto fail;
		}
	}
	return o;
fail:
	json_decref(o);
	return NULL;
}

/* ---- over time ---- */

static json_t *u64_array(const uint64_t *v, size_t n)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < n; i++)
		if (json_array_append_new(arr, mt_json_u64(v[i])) < 0) {
			json_decref(arr);
			return NULL;
		}
	return arr;
}

/* Whether any shown kind's value changes at bucket b. */
static bool changes_at(const struct mt_timeline_proc *tp, uint32_t b)
{
	for (unsigned k = 0; k < MT_KIND_COUNT; k++)
		if (tp->live[k] && mt_kind_shown(tp->in, k) && tp->live[k][b] != tp->live[k][b - 1])
			return true;
	return false;
}

/*
 * The buckets where a value changes (and the last one): a value holds until
 * the next point, as the page draws it, so nothing is lost.
 */
static json_t *timeline_json(struct mt_analysis *a, const struct mt_timeline_proc *tp)
{
	json_t *o = json_object(), *kinds = json_object(), *t = json_array();
	json_t *v[MT_KIND_COUNT] = {0};

	if (!o || !kinds || !t)
		goto fail;
	json_object_set_new(o, "end_ns",
	                    mt_json_u64(mt_analysis_since_start(a, tp->in, tp->in->end_time)));
	for (unsigned k = 0; k < MT_KIND_COUNT; k++)
		if (tp->live[k] && mt_kind_shown(tp->in, k) &&
		    (!(v[k] = json_array()) ||
		     json_object_set_new(kinds, mt_kind_name(k), v[k]) < 0))
			goto fail;
	for (uint32_t b = 0; b < tp->nbuckets; b++) {
		if (b && b + 1 < tp->nbuckets && !changes_at(tp, b))
			continue;
		if (json_array_append_new(t, mt_json_u64(mt_timeline_bucket_ns(a, tp, b))) < 0)
			goto fail;
		for (unsigned k = 0; k < MT_KIND_COUNT; k++)
			if (v[k] && json_array_append_new(v[k], mt_json_u64(tp->live[k][b])) < 0)
				goto fail;
	}
	json_object_set_new(o, "t_ns", t);
	json_object_set_new(o, "kinds", kinds);
	return o;
fail:
	json_decref(t);
	json_decref(kinds);
	json_decref(o);
	return NULL;
}

/* The sampler's series in the timeline's buckets, the highest of each; null without samples. */
static json_t *samples_json(struct mt_analysis *a, const struct mt_timeline_proc *tp)
{
	static const struct {
		const char *name;
		enum mt_sample_field field;
	} series[] = {
	        {"rss", MT_SAMPLE_RSS},
	        {"pss", MT_SAMPLE_PSS},
	        {"private_dirty", MT_SAMPLE_PRIVATE_DIRTY},
	        {"cgroup_current", MT_SAMPLE_CGROUP_CURRENT},
	        {"cgroup_max", MT_SAMPLE_CGROUP_MAX},
	};
	enum { NSERIES = sizeof(series) / sizeof(series[0]) };
	const struct mt_instance *in = tp->in;
	uint64_t *v[NSERIES] = {0}, *t = NULL;
	uint32_t n = 0, last = UINT32_MAX;
	json_t *o = NULL;

	if (!in->nsamples)
		return json_null();
	t = malloc(tp->nbuckets * sizeof(*t));
	for (int s = 0; s < NSERIES; s++)
		if (!(v[s] = malloc(tp->nbuckets * sizeof(*v[s]))))
			goto out;
	if (!t)
		goto out;
	/* one point per bucket that has samples, at its first sample's time */
	for (uint64_t i = 0; i < in->nsamples; i++) {
		const struct mt_sample_point *sp = &in->samples[i];
		uint64_t b = sp->time > tp->start ? (sp->time - tp->start) / tp->width : 0;
		if (b >= tp->nbuckets)
			b = tp->nbuckets - 1;
		if (b != last) {
			last = (uint32_t)b;
			t[n] = mt_analysis_since_start(a, in, sp->time);
			for (int s = 0; s < NSERIES; s++)
				v[s][n] = sp->values[series[s].field];
			n++;
			continue;
		}
		for (int s = 0; s < NSERIES; s++)
			if (sp->values[series[s].field] > v[s][n - 1])
				v[s][n - 1] = sp->values[series[s].field];
	}
	o = json_object();
	if (!o)
		goto out;
	json_object_set_new(o, "t_ns", u64_array(t, n));
	for (int s = 0; s < NSERIES; s++)
		json_object_set_new(o, series[s].name, u64_array(v[s], n));
out:
	for (int s = 0; s < NSERIES; s++)
		free(v[s]);
	free(t);
	return o;
}

static const char *why_name(enum mt_snapshot_why why)
{
	switch (why) {
	case MT_SNAPSHOT_MARK:
		return "mark";
	case MT_SNAPSHOT_FAIL:
		return "failure";
	default:
		return "time";
	}
}

/* A node's bytes and blocks in a snapshot: stacks that read the same are one node. */
struct held {
	uint64_t bytes, blocks;
};

/*
 * One kind of a snapshot as the change from the one before (*prev, empty
 * for the first, replaced by this one's nodes): the nodes whose bytes or
 * blocks differ, and 0, 0 for a node no longer there. Consecutive snapshots
 * differ in a few stacks.
 */
static json_t *snapshot_kind_json(struct builder *b, const struct mt_snapshot_kind *sk,
                                  struct mt_map *prev)
{
	struct mt_map now;
	json_t *o = json_object(), *rows = json_array();
	uint64_t node;
	void *v;
	bool created;

	mt_map_init(&now, sizeof(struct held));
	if (!o || !rows)
		goto fail;
	for (uint32_t i = 0; i < sk->nrows; i++) {
		int64_t n = node_of(b, sk->rows[i].stack_instance, sk->rows[i].stack);
		struct held *h = n < 0 ? NULL : mt_map_put(&now, (uint64_t)n, &created);
		if (!h)
			goto fail;
		h->bytes += sk->rows[i].bytes;
		h->blocks += sk->rows[i].blocks;
	}
	for (size_t i = 0; mt_map_next(&now, &i, &node, &v);) {
		const struct held *h = v, *p = mt_map_get(prev, node);
		if ((!p || p->bytes != h->bytes || p->blocks != h->blocks) &&
		    append_row(rows, node, h->bytes, h->blocks) < 0)
			goto fail;
	}
	for (size_t i = 0; mt_map_next(prev, &i, &node, &v);)
		if (!mt_map_get(&now, node) && append_row(rows, node, 0, 0) < 0)
			goto fail;
	mt_map_free(prev);
	*prev = now;
	json_object_set_new(o, "rows", rows);
	json_object_set_new(o, "kept_stacks", mt_json_u64(sk->nrows));
	json_object_set_new(o, "cut_stacks", mt_json_u64(sk->rest_stacks));
	json_object_set_new(o, "cut_value", mt_json_u64(sk->rest_bytes));
	json_object_set_new(o, "cut_blocks", mt_json_u64(sk->rest_blocks));
	return o;
fail:
	mt_map_free(&now);
	json_decref(rows);
	json_decref(o);
	return NULL;
}

static json_t *snapshots_json(struct builder *b, const struct mt_timeline_proc *tp)
{
	json_t *arr = json_array();
	struct mt_map prev[MT_KIND_COUNT];

	for (unsigned k = 0; k < MT_KIND_COUNT; k++)
		mt_map_init(&prev[k], sizeof(struct held));
	for (uint32_t i = 0; arr && i < tp->nsnaps; i++) {
		const struct mt_snapshot *s = &tp->snaps[i];
		json_t *o = json_object(), *kinds = json_object();
		if (!o || !kinds || json_array_append_new(arr, o) < 0) {
			json_decref(kinds);
			goto fail;
		}
		json_object_set_new(o, "t_ns",
		                    mt_json_u64(mt_analysis_since_start(b->a, tp->in, s->time)));
		json_object_set_new(o, "until_ns",
		                    mt_json_u64(mt_analysis_since_start(b->a, tp->in, s->until)));
		json_object_set_new(o, "why", json_string(why_name(s->why)));
		json_object_set_new(o, "kinds", kinds);
		for (unsigned k = 0; k < MT_KIND_COUNT; k++) {
			json_t *ko;
			if (!mt_kind_shown(tp->in, k))
				continue;
			ko = snapshot_kind_json(b, &s->kind[k], &prev[k]);
			if (!ko || json_object_set_new(kinds, mt_kind_name(k), ko) < 0)
				goto fail;
		}
	}
	goto out;
fail:
	json_decref(arr);
	arr = NULL;
out:
	for (unsigned k = 0; k < MT_KIND_COUNT; k++)
		mt_map_free(&prev[k]);
	return arr;
}

static json_t *process_json(struct builder *b, const struct mt_process_result *p,
                            const struct mt_timeline_proc *tp)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "instance", json_integer(p->in->id));
	json_object_set_new(o, "flames", flames_json(b, p));
	if (tp && tp->in) {
		json_object_set_new(o, "timeline", timeline_json(b->a, tp));
		json_object_set_new(o, "samples", samples_json(b->a, tp));
		json_object_set_new(o, "snapshots", snapshots_json(b, tp));
	} else {
		json_object_set_new(o, "timeline", json_null());
		json_object_set_new(o, "samples", json_null());
		json_object_set_new(o, "snapshots", json_array());
	}
	/* a member that could not be made is missing: the page must not show a part of it */
	if (!json_object_get(o, "flames") || !json_object_get(o, "timeline") ||
	    !json_object_get(o, "samples") || !json_object_get(o, "snapshots")) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *mt_view_data(struct mt_analysis *a, const struct mt_timeline *t, const char *file,
                     unsigned top)
{
	struct builder b = {.a = a};
	json_t *root = json_object(), *procs = json_array(), *ret = NULL;

	b.syms = calloc(MAX_FRAMES, sizeof(*b.syms));
	b.frames = json_array();
	b.nodes = json_array();
	mt_map_init(&b.labels, sizeof(uint32_t));
	mt_map_init(&b.children, sizeof(uint32_t));
	mt_map_init(&b.stacks, sizeof(uint32_t));
	if (!root || !procs || !b.syms || !b.frames || !b.nodes)
		goto out;
	json_object_set_new(root, "memtrace_view", json_integer(1));
	json_object_set_new(root, "report", mt_report_json(a, file, top));
	if (!json_object_get(root, "report") ||
	    report_nodes(&b, json_object_get(root, "report")) < 0)
		goto out;
	for (uint32_t i = 0; i < a->nprocs; i++) {
		json_t *p = process_json(&b, &a->procs[i], i < t->nprocs ? &t->procs[i] : NULL);
		if (!p || json_array_append_new(procs, p) < 0)
			goto out;
	}
	json_object_set(root, "processes", procs);
	json_object_set(root, "frames", b.frames);
	json_object_set(root, "nodes", b.nodes);
	{
		json_t *limits = json_object();
		json_object_set_new(limits, "flame_stacks", json_integer(MT_VIEW_FLAME_STACKS));
		json_object_set_new(limits, "snapshot_stacks", json_integer(MT_SNAPSHOT_STACKS));
		json_object_set_new(limits, "timeline_buckets", json_integer(MT_TIMELINE_BUCKETS));
		json_object_set_new(root, "limits", limits);
	}
	ret = root;
	root = NULL;
out:
	json_decref(root);
	json_decref(procs);
	json_decref(b.frames);
	json_decref(b.nodes);
	mt_map_free(&b.labels);
	mt_map_free(&b.children);
	mt_map_free(&b.stacks);
	free(b.syms);
	return ret;
}
