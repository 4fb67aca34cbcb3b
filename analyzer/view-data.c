/* SPDX-License-Identifier: MIT */
/*
 * The viewer's data (see view-data.h). Every stack is symbolized once and
 * walked outermost first into a tree of frames: node n is the pair (parent
 * node, frame label), node 0 the root, so stacks that share a beginning
 * share its nodes, and a flame graph is a list of (node, value, blocks)
 * triples the page folds into a tree. A flame graph weighs every stack;
 * a node under 1/MT_VIEW_FLAME_MIN_SHARE of its total is merged with its
 * small siblings into one node under their parent. The tree is built in
 * memory and written at the end with only the nodes the data refers to
 * (renumbered), so the frames of the stacks merged away cost the page nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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
	char **names; /* frame labels, by frame index */
	struct tnode {
		uint32_t parent, frame;
	} * tree; /* by node; [0], the root, unused */
	uint32_t nnames, nnodes;
	size_t names_cap, nodes_cap;
	json_t **refs; /* the JSON integers that hold a node, renumbered at the end */
	size_t nrefs, refs_cap;
	struct mt_map labels;   /* label hash -> frame index (+1, probing on a clash) */
	struct mt_map children; /* parent << 32 | frame -> node */
	struct mt_map stacks;   /* stack_instance << 32 | stack -> node */
	struct mt_map seen;     /* a symbolized frame's hash -> struct sym_seen */
};

struct sym_seen {
	struct mt_sym sym;
	uint32_t frame;
};

/* Makes room for one more of n elements of `size` in *arr; -ENOMEM. */
static int reserve(void **arr, size_t *cap, size_t n, size_t size)
{
	void *p;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 1024;
	if (!(p = realloc(*arr, c * size)))
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

/* A JSON integer that holds `node`, to be renumbered when the tree is written; NULL on error. */
static json_t *node_ref(struct builder *b, uint32_t node)
{
	json_t *j;

	if (reserve((void **)&b->refs, &b->refs_cap, b->nrefs, sizeof(*b->refs)) < 0 ||
	    !(j = json_integer(node)))
		return NULL;
	b->refs[b->nrefs++] = j;
	return j;
}

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
			char *copy = strdup(label);
			if (!copy || reserve((void **)&b->names, &b->names_cap, b->nnames,
			                     sizeof(*b->names)) < 0) {
				free(copy);
				return -ENOMEM;
			}
			*idx = b->nnames;
			b->names[b->nnames++] = copy;
			return *idx;
		}
		if (!strcmp(b->names[*idx], label))
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
		if (reserve((void **)&b->tree, &b->nodes_cap, b->nnodes + 1, sizeof(*b->tree)) <
		    0) {
			mt_map_del(&b->children, (uint64_t)parent << 32 | frame);
			return -ENOMEM;
		}
		*node = ++b->nnodes;
		b->tree[*node] = (struct tnode){.parent = parent, .frame = frame};
	}
	return *node;
}

/*
 * The frame index of a symbolized frame; -ENOMEM. The same frames recur in
 * most stacks: they are looked up by what makes their label (the
 * symbolizer's strings are interned, so a pointer stands for its text; a
 * group's folded native label is its own copy, compared by its text: one
 * Python frame ends groups of several labels) before the label is written
 * and hashed.
 */
static int64_t sym_frame(struct builder *b, const struct mt_sym *s)
{
	uint64_t h = hash_label(s->function ? "f" : "a");
	char label[1024];
	struct sym_seen *seen;
	int64_t frame;
	bool created;

	h = (h ^ (uintptr_t)s->function) * 1099511628211ull;
	h = (h ^ (uintptr_t)s->file) * 1099511628211ull;
	h = (h ^ (uintptr_t)s->module) * 1099511628211ull;
	h = (h ^ ((uint64_t)s->line << 1 | s->inlined)) * 1099511628211ull;
	h = (h ^ (s->function ? 0 : s->module ? s->offset : s->address)) * 1099511628211ull;
	if (s->tail)
		h = (h ^ hash_label(s->tail)) * 1099511628211ull;
	for (;; h++) {
		if (!(seen = mt_map_put(&b->seen, h, &created)))
			return -ENOMEM;
		if (created)
			break;
		if (seen->sym.function == s->function && seen->sym.file == s->file &&
		    seen->sym.module == s->module && seen->sym.line == s->line &&
		    seen->sym.inlined == s->inlined && !seen->sym.tail == !s->tail &&
		    (!s->tail || !strcmp(seen->sym.tail, s->tail)) &&
		    (s->function || (seen->sym.offset == s->offset &&
		                     (s->module || seen->sym.address == s->address))))
			return seen->frame;
	}
	mt_cmd_frame_text(label, sizeof(label), s);
	if (s->inlined && strlen(label) + 10 < sizeof(label))
		strcat(label, " [inlined]");
	if ((frame = frame_of(b, label)) < 0) {
		mt_map_del(&b->seen, h);
		return frame;
	}
	/* frame_of made no put in b->seen: the pointer holds */
	seen->sym = *s;
	seen->frame = (uint32_t)frame;
	return frame;
}

/* The node of a stack's innermost frame; -ENOMEM. */
static int64_t node_of(struct builder *b, uint32_t stack_instance, uint32_t stack)
{
	uint64_t key = (uint64_t)stack_instance << 32 | stack;
	uint32_t *memo = mt_map_get(&b->stacks, key);
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
		if ((frame = sym_frame(b, &b->syms[i])) < 0)
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
		if (node < 0 || json_object_set_new(j, "node", node_ref(b, (uint32_t)node)) < 0)
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
static int append_row(struct builder *b, json_t *rows, uint64_t node, uint64_t bytes,
                      uint64_t blocks)
{
	return json_array_append_new(rows, node_ref(b, (uint32_t)node)) < 0 ||
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

/* A node's figures in one flame graph. */
struct held {
	uint64_t bytes, blocks;
};

/*
 * Where a node's own value goes in a flame graph whose nodes have the
 * totals `sums`: itself when it is kept, else the merged node under its
 * deepest kept ancestor (*cut: the child of that ancestor it came through).
 */
static uint32_t kept_ancestor(const struct builder *b, const struct held *sums, uint64_t min,
                              uint32_t node, uint32_t *cut)
{
	*cut = 0;
	/* totals only shrink away from the root: the first kept node up the path is the deepest */
	for (uint32_t n = node; n; *cut = n, n = b->tree[n].parent)
		if (sums[n].bytes >= min)
			return n;
	return 0;
}

/*
 * One flame graph: every stack with a value merged into the tree, and the
 * nodes under 1/MT_VIEW_FLAME_MIN_SHARE of the total (`min_value`) merged,
 * per parent, into one node "[N smaller, each under 0.1%]" that holds
 * them all, so every value the page shows is exact and the total is the
 * report's.
 */
static json_t *metric_json(struct builder *b, const struct mt_kind_result *k, enum mt_metric m)
{
	size_t n;
	struct mt_stack_row *ranked = mt_cmd_ranked(k, m, &n);
	json_t *o = json_object(), *rows = json_array();
	struct held *own = NULL,
	            *sums = NULL; /* by node: the stacks that end there; with callees' */
	struct mt_map merged, cuts;
	uint64_t total = mt_kind_result_total(k, m), node, min, merged_nodes = 0;
	uint32_t nn, *cut_count = NULL;
	void *v;
	bool created;
	char label[64];

	mt_map_init(&merged, sizeof(struct held)); /* row node -> its value */
	mt_map_init(&cuts, sizeof(uint8_t));       /* kept node << 32 | cut node: seen */
	if (!ranked || !o || !rows)
		goto fail;
	/* 0.1% of the total, rounded up: a node of exactly that much is kept */
	min = total / MT_VIEW_FLAME_MIN_SHARE + (total % MT_VIEW_FLAME_MIN_SHARE != 0);
	for (size_t i = 0; i < n; i++) {
		int64_t nd = node_of(b, ranked[i].stack_instance, ranked[i].stack);
		if (nd < 0)
			goto fail;
		ranked[i].stack = (uint32_t)nd; /* from here on, the row's node */
	}
	/* the merged nodes made below come after these and need no room here */
	nn = b->nnodes;
	own = calloc((size_t)nn + 1, sizeof(*own));
	sums = calloc((size_t)nn + 1, sizeof(*sums));
	cut_count = calloc((size_t)nn + 1, sizeof(*cut_count));
	if (!own || !sums || !cut_count)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		own[ranked[i].stack].bytes += mt_stack_row_value(&ranked[i], m);
		own[ranked[i].stack].blocks += row_blocks(&ranked[i], m);
	}
	/* a parent is made before its children: one pass from the last node adds them up */
	memcpy(sums, own, ((size_t)nn + 1) * sizeof(*sums));
	for (uint32_t x = nn; x > 0; x--) {
		sums[b->tree[x].parent].bytes += sums[x].bytes;
		sums[b->tree[x].parent].blocks += sums[x].blocks;
	}
	/* how many nodes each kept node has merged under it, for the merged node's label */
	for (uint32_t x = 1; x <= nn; x++) {
		uint32_t cut, at;
		if (!own[x].bytes && !own[x].blocks)
			continue;
		at = kept_ancestor(b, sums, min, x, &cut);
		if (!cut)
			continue;
		if (!mt_map_put(&cuts, (uint64_t)at << 32 | cut, &created))
			goto fail;
		if (created) {
			cut_count[at]++;
			merged_nodes++;
		}
	}
	for (uint32_t x = 1; x <= nn; x++) {
		uint32_t cut, at;
		int64_t target, frame;
		struct held *h;
		if (!own[x].bytes && !own[x].blocks)
			continue;
		target = at = kept_ancestor(b, sums, min, x, &cut);
		if (cut) {
			snprintf(label, sizeof(label), "[%" PRIu32 " smaller, each under %s]",
			         cut_count[at], MT_VIEW_FLAME_MIN_TEXT);
			if ((frame = frame_of(b, label)) < 0 ||
			    (target = child_of(b, at, (uint32_t)frame)) < 0)
				goto fail;
		}
		if (!(h = mt_map_put(&merged, (uint64_t)target, &created)))
			goto fail;
		h->bytes += own[x].bytes;
		h->blocks += own[x].blocks;
	}
	for (size_t i = 0; mt_map_next(&merged, &i, &node, &v);) {
		const struct held *h = v;
		if (append_row(b, rows, node, h->bytes, h->blocks) < 0)
			goto fail;
	}
	json_object_set_new(o, "rows", rows);
	json_object_set_new(o, "stacks", mt_json_u64(n));
	json_object_set_new(o, "total", mt_json_u64(total));
	json_object_set_new(o, "min_value", mt_json_u64(min));
	json_object_set_new(o, "merged_nodes", mt_json_u64(merged_nodes));
	rows = NULL;
	goto out;
fail:
	json_decref(o);
	o = NULL;
out:
	free(ranked);
	free(own);
	free(sums);
	free(cut_count);
	mt_map_free(&merged);
	mt_map_free(&cuts);
	json_decref(rows);
	return o;
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
		    append_row(b, rows, node, h->bytes, h->blocks) < 0)
			goto fail;
	}
	for (size_t i = 0; mt_map_next(prev, &i, &node, &v);)
		if (!mt_map_get(&now, node) && append_row(b, rows, node, 0, 0) < 0)
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

/*
 * The tree as the page reads it ("frames", "nodes" in root): the nodes the
 * data refers to and their ancestors, numbered in the order they were made
 * (a parent before its children), and the labels they use; every node the
 * data holds is renumbered to match. -ENOMEM.
 */
static int write_tree(struct builder *b, json_t *root)
{
	uint32_t *id = calloc((size_t)b->nnodes + 1, sizeof(*id));
	uint32_t *label = malloc(((size_t)b->nnames + 1) * sizeof(*label));
	json_t *frames = json_array(), *nodes = json_array();
	uint32_t count = 0, nlabels = 0;
	int r = -ENOMEM;

	if (!id || !label || !frames || !nodes)
		goto out;
	for (uint32_t f = 0; f < b->nnames; f++)
		label[f] = UINT32_MAX;
	/* id[n] != 0: node n is written; its ancestors are too */
	for (size_t i = 0; i < b->nrefs; i++)
		for (uint32_t n = (uint32_t)json_integer_value(b->refs[i]); n && !id[n];
		     n = b->tree[n].parent)
			id[n] = 1;
	for (uint32_t n = 1; n <= b->nnodes; n++) {
		uint32_t f = b->tree[n].frame;
		if (!id[n])
			continue;
		id[n] = ++count;
		/* the labels are mt_cmd_frame_text's, their names escaped: valid UTF-8 */
		if (label[f] == UINT32_MAX &&
		    json_array_append_new(frames, json_string(b->names[f])) < 0)
			goto out;
		if (label[f] == UINT32_MAX)
			label[f] = nlabels++;
		if (json_array_append_new(nodes, json_integer(id[b->tree[n].parent])) < 0 ||
		    json_array_append_new(nodes, json_integer(label[f])) < 0)
			goto out;
	}
	for (size_t i = 0; i < b->nrefs; i++)
		json_integer_set(b->refs[i], id[json_integer_value(b->refs[i])]);
	if (json_object_set(root, "frames", frames) < 0 ||
	    json_object_set(root, "nodes", nodes) < 0)
		goto out;
	r = 0;
out:
	free(id);
	free(label);
	json_decref(frames);
	json_decref(nodes);
	return r;
}

json_t *mt_view_data(struct mt_analysis *a, const struct mt_timeline *t, const char *file,
                     unsigned top)
{
	struct builder b = {.a = a};
	json_t *root = json_object(), *procs = json_array(), *ret = NULL;

	b.syms = calloc(MAX_FRAMES, sizeof(*b.syms));
	mt_map_init(&b.labels, sizeof(uint32_t));
	mt_map_init(&b.children, sizeof(uint32_t));
	mt_map_init(&b.stacks, sizeof(uint32_t));
	mt_map_init(&b.seen, sizeof(struct sym_seen));
	if (!root || !procs || !b.syms)
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
	if (write_tree(&b, root) < 0)
		goto out;
	{
		json_t *limits = json_object();
		json_object_set_new(limits, "flame_min_share",
		                    json_integer(MT_VIEW_FLAME_MIN_SHARE));
		json_object_set_new(limits, "snapshot_stacks", json_integer(MT_SNAPSHOT_STACKS));
		json_object_set_new(limits, "timeline_buckets", json_integer(MT_TIMELINE_BUCKETS));
		json_object_set_new(root, "limits", limits);
	}
	ret = root;
	root = NULL;
out:
	json_decref(root);
	json_decref(procs);
	for (uint32_t i = 0; i < b.nnames; i++)
		free(b.names[i]);
	free(b.names);
	free(b.tree);
	free(b.refs);
	mt_map_free(&b.labels);
	mt_map_free(&b.children);
	mt_map_free(&b.stacks);
	mt_map_free(&b.seen);
	free(b.syms);
	return ret;
}
