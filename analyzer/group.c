/* SPDX-License-Identifier: MIT */
/*
 * Stacks grouped by their Python stack (see analysis.h, docs/python.md):
 * a stack with Python frames belongs to the group of its frames from the
 * innermost Python frame out to the outermost one and of the label
 * (label.h) of its native tail, the frames inside that innermost Python
 * frame. The group's frames are those, the native frames between Python
 * frames included, the innermost carrying the tail's label in `tail`; the
 * native frames outside the outermost Python frame (the interpreter's
 * main) are left out. A stack
 * without Python frames is in no group and stays as it is.
 *
 * A stack's group is found once (its frames from the frame table,
 * frames.h, a key made of their content ids) and kept; a stack whose frames
 * from its first Python activation out are another's, with the same tail,
 * goes to that one's group without them (struct resumed). A group is known
 * by its representative, the smallest (stack_instance, stack) of the stacks
 * met in it, so that every command names a group the same way.
 *
 * May not: print, read the environment.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "frames.h"
#include "grow.h"
#include "label.h"
#include "map.h"

#define MAX_FRAMES 512

/*
 * A group's key is the content ids (frames.h) of its frames with its tail's
 * id first: equal keys, equal strings, one group. The tail's id is 0 for no
 * tail (and for an empty one, which the key has never told apart).
 */
struct group {
	uint32_t *key;    /* 1 + nframes */
	uint32_t *frames; /* indices into the frame table */
	unsigned nframes;
	uint32_t rep_instance, rep_stack;
	/*
	 * the group's own copy of its tail's name, NULL for a stack whose innermost frame is
	 * Python: flamegraph knows a folded frame's text by this address
	 */
	char *tail;
};

struct mt_groups {
	const char *plumbing;
	struct mt_map of_stack; /* stack_instance << 32 | stack -> uint32_t group + 1, 0: none */
	struct mt_map by_hash;  /* hash of a key -> uint32_t group + 1; collisions probe hash + 1 */
	struct mt_map
	        plumbing_of; /* a function's interned name -> uint8_t 1: not plumbing, 2: is */
	/* a label frame's content id << 1 | whether it has a function -> uint32_t tail id */
	struct mt_map tail_of;
	struct mt_map tail_by_hash; /* hash of a tail -> uint32_t tail id; collisions hash + 1 */
	char **tails;               /* by id; [0] unused */
	uint32_t ntails;
	size_t tails_cap;
	struct group *v;
	uint32_t n, cap;
	uint32_t frames[MAX_FRAMES];
	uint32_t key[MAX_FRAMES + 1];
	/*
	 * by frame of the table: its mt_label_class + 1, 0 not asked yet. The label's walk
	 * read every native frame inside the innermost Python one, 30 on a torch stack, from
	 * the table's 64-byte syms: a cache miss each, a third of the grouping's own time
	 */
	uint8_t *label_class;
	size_t label_class_cap;
	/*
	 * A stack's group, known from its frames up to its first Python
	 * activation (frames.h, struct mt_frames_at) and its tail: the frames
	 * from there out are those of every stack with the same, which were
	 * built and keyed once. hash of struct resumed's first five -> struct
	 * resumed; a collision probes hash + 1.
	 */
	struct mt_map resumed;
};

/* What a stack with these frames up to its first activation, and this tail, groups as. */
struct resumed {
	const void *pystack;
	uint32_t instance, node, inlined, tail_id;
	uint32_t group; /* + 1 */
	uint32_t rest;  /* its frames from the activation on, to the end */
};

/* a growable string */
struct text {
	char *s;
	size_t len, cap;
};

static int text_put(struct text *t, const void *p, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 256;
		char *s;
		while (cap < t->len + n + 1)
			cap *= 2;
		if (!(s = realloc(t->s, cap)))
			return -ENOMEM;
		t->s = s;
		t->cap = cap;
	}
	memcpy(t->s + t->len, p, n);
	t->len += n;
	t->s[t->len] = 0;
	return 0;
}

/* The tail's label as a name: the function without parameters, or module+0xoffset, or 0xaddr. */
static char *tail_name(const struct mt_sym *s)
{
	const char *m = s->module ? strrchr(s->module, '/') : NULL;
	char num[48];
	struct text t = {0};
	int r;

	m = m ? m + 1 : s->module;
	if (s->function) {
		r = text_put(&t, s->function, mt_label_name_length(s->function));
	} else if (m) {
		snprintf(num, sizeof(num), "+0x%" PRIx64, s->offset);
		r = text_put(&t, m, strlen(m)) < 0 ? -ENOMEM : text_put(&t, num, strlen(num));
	} else {
		snprintf(num, sizeof(num), "0x%" PRIx64, s->address);
		r = text_put(&t, num, strlen(num));
	}
	if (r < 0) {
		free(t.s);
		return NULL;
	}
	return t.s;
}

static uint64_t hash_of(const char *s, size_t n)
{
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static uint64_t hash_key(const uint32_t *k, size_t n)
{
	uint64_t h = n;

	for (size_t i = 0; i < n; i++)
		h = (h ^ k[i]) * 0x9e3779b97f4a7c15ull;
	return h ^ h >> 32;
}

/*
 * The id of the tail a label frame makes, its name in *name: the name
 * depends only on what the frame's content id stands for and on whether
 * it has a function, so it is made once per pair; 0 for an empty name. A
 * negative errno.
 */
static int64_t tail_of(struct mt_groups *g, const struct mt_sym *label, uint32_t content,
                       const char **name)
{
	/* a name "" and none are one content, but not one tail */
	uint64_t key = (uint64_t)content << 1 | (label->function != NULL);
	uint32_t *slot = mt_map_get(&g->tail_of, key), *found, id = 0;
	char *t;
	uint64_t h;
	bool created;

	if (slot) {
		*name = *slot ? g->tails[*slot] : "";
		return *slot;
	}
	if (!(t = tail_name(label)))
		return -ENOMEM;
	for (h = hash_of(t, strlen(t)); t[0]; h++) {
		if (!(found = mt_map_put(&g->tail_by_hash, h, &created)))
			goto nomem;
		if (!created) {
			if (strcmp(g->tails[*found], t))
				continue;
			id = *found;
			break;
		}
		if (mt_grow((void **)&g->tails, &g->tails_cap, (size_t)g->ntails + 1,
		            sizeof(*g->tails)) < 0) {
			mt_map_del(&g->tail_by_hash, h);
			goto nomem;
		}
		g->tails[g->ntails] = t;
		id = *found = g->ntails++;
		t = NULL;
		break;
	}
	free(t);
	if (!(slot = mt_map_put(&g->tail_of, key, &created)))
		return -ENOMEM;
	*slot = id;
	*name = id ? g->tails[id] : "";
	return id;
nomem:
	free(t);
	return -ENOMEM;
}

static int new_group(struct mt_groups *g, unsigned nkey, const char *tail, uint32_t si,
                     uint32_t stack)
{
	struct group *grp;

	if (g->n == g->cap) {
		uint32_t cap = g->cap ? g->cap * 2 : 64;
		void *p = realloc(g->v, cap * sizeof(*g->v));
		if (!p)
			return -ENOMEM;
		g->v = p;
		g->cap = cap;
	}
	grp = &g->v[g->n];
	*grp = (struct group){.nframes = nkey - 1, .rep_instance = si, .rep_stack = stack};
	grp->key = malloc(nkey * sizeof(*grp->key));
	grp->frames = malloc(nkey * sizeof(*grp->frames));
	grp->tail = tail ? strdup(tail) : NULL;
	if (!grp->key || !grp->frames || (tail && !grp->tail)) {
		free(grp->key);
		free(grp->frames);
		free(grp->tail);
		return -ENOMEM;
	}
	memcpy(grp->key, g->key, nkey * sizeof(*grp->key));
	memcpy(grp->frames, g->frames, (nkey - 1) * sizeof(*grp->frames));
	return (int)++g->n;
}

/*
 * Whether a function is plumbing, kept by its name's address (the
 * symbolizer interns names): matching every frame of 200 000 torch stacks
 * against the patterns took half of the grouping's time.
 */
static bool plumbing(struct mt_groups *g, const char *function)
{
	bool created;
	uint8_t *slot = mt_map_put(&g->plumbing_of, (uint64_t)(uintptr_t)function, &created);

	if (!slot)
		return mt_label_is_plumbing(function, g->plumbing);
	if (created)
		*slot = mt_label_is_plumbing(function, g->plumbing) ? 2 : 1;
	return *slot == 2;
}

struct label_walk {
	struct mt_groups *g;
	const struct mt_frame_columns *col;
};

/* The class of the stack's frame i (g->frames[i]), kept by frame of the table. */
static enum mt_label_class frame_class(void *ctx, int i)
{
	struct label_walk *w = ctx;
	struct mt_groups *g = w->g;
	uint32_t frame = g->frames[i];
	const char *f;

	if (frame < g->label_class_cap && g->label_class[frame])
		return (enum mt_label_class)(g->label_class[frame] - 1);
	f = w->col->sym[frame].function;
	enum mt_label_class c = !f               ? MT_LABEL_UNNAMED
	                        : plumbing(g, f) ? MT_LABEL_PLUMBING
	                                         : MT_LABEL_NAMED;
	if (frame >= g->label_class_cap) {
		size_t had = g->label_class_cap;
		/* without memory for the memo, the frame is asked again next time */
		if (mt_grow((void **)&g->label_class, &g->label_class_cap, (size_t)frame + 1, 1) <
		    0)
			return c;
		memset(g->label_class + had, 0, g->label_class_cap - had);
	}
	g->label_class[frame] = (uint8_t)(c + 1);
	return c;
}

/* The id of the tail of a stack whose innermost Python frame is g->frames[py], its name in *tail.
 */
static int64_t stack_tail(struct mt_groups *g, const struct mt_frame_columns *col, int py,
                          const char **tail)
{
	struct label_walk w = {g, col};
	uint32_t label;

	if (py <= 0)
		return 0;
	label = g->frames[mt_label_frame_by(py, frame_class, &w)];
	return tail_of(g, &col->sym[label], col->content[label], tail);
}

static uint64_t resumed_hash(uint32_t si, const struct mt_frames_at *at, int64_t tail_id)
{
	uint64_t h = mt_map_mix((uint64_t)(uintptr_t)at->pystack);

	h = mt_map_mix(h ^ ((uint64_t)si << 32 | at->node));
	return mt_map_mix(h ^ ((uint64_t)at->inlined << 32 | (uint64_t)tail_id));
}

/* The entry for (si, at, tail_id), or NULL and in *free_at the key where it would go. */
static struct resumed *resumed_find(const struct mt_groups *g, uint32_t si,
                                    const struct mt_frames_at *at, int64_t tail_id,
                                    uint64_t *free_at)
{
	struct resumed *e;

	for (uint64_t h = resumed_hash(si, at, tail_id);; h++) {
		if (!(e = mt_map_get(&g->resumed, h))) {
			*free_at = h;
			return NULL;
		}
		if (e->pystack == at->pystack && e->instance == si && e->node == at->node &&
		    e->inlined == at->inlined && e->tail_id == (uint32_t)tail_id)
			return e;
	}
}

/* A stack's group + 1, 0 for a stack without Python frames, or a negative errno. */
static int group_of(struct mt_analysis *a, uint32_t si, uint32_t stack)
{
	struct mt_groups *g = a->groups;
	uint64_t skey = (uint64_t)si << 32 | stack;
	uint32_t *slot = mt_map_get(&g->of_stack, skey);
	const struct mt_frame_columns *col;
	const struct mt_pyframe *pyframes;
	const char *tail = NULL;
	int n, py = -1, last = -1, r;
	uint32_t npy = 0;
	int64_t tail_id = 0;
	unsigned nkey;
	uint64_t h, resume_key = 0;
	bool created;
	struct mt_frames_at at;
	struct resumed *known = NULL;
	int before, whole;

	if (slot)
		return (int)*slot;
	/*
	 * No Python stack, no Python frame: the stack is in no group, and its native frames are
	 * not looked up for it (only a row that is printed needs them). Looked up, every frame
	 * of every stack of a C program was symbolized, and `check` of one with nothing to say
	 * spent 0.1 s of its 0.11 s inflating libc's compressed debug sections.
	 */
	if (mt_replay_pystack(a->replay, si, stack, &pyframes, &npy) < 0 || !npy) {
		r = 0;
		goto done;
	}
	/* its frames up to its first activation, and the rest as another stack's, if known */
	before = mt_frames_until_python(a, si, stack, g->frames, MAX_FRAMES, &at);
	if (before < 0)
		return before;
	col = mt_frames_col(a);
	if (at.node) {
		if ((tail_id = stack_tail(g, col, before, &tail)) < 0)
			return (int)tail_id;
		known = resumed_find(g, si, &at, tail_id, &resume_key);
		/* a stack cut at MAX_FRAMES is grouped by the frames it keeps: built whole */
		if (known && before + known->rest < MAX_FRAMES) {
			struct group *grp = &g->v[known->group - 1];
			r = (int)known->group;
			if (skey < ((uint64_t)grp->rep_instance << 32 | grp->rep_stack)) {
				grp->rep_instance = si;
				grp->rep_stack = stack;
			}
			goto done;
		}
	}
	/* with no activation reached, the walk went to the end: the frames are all there */
	n = whole = at.node ? mt_frames_of_stack(a, si, stack, g->frames, MAX_FRAMES) : before;
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		if (col->flags[g->frames[i]] & MT_FRAME_PYTHON) {
			py = py < 0 ? i : py;
			last = i;
		}
	r = 0;
	if (py < 0)
		goto done;
	/* the interpreter's start (main, Py_RunMain, _start) outside the outermost one tells
	 * nothing */
	n = last + 1;
	if ((tail_id = stack_tail(g, col, py, &tail)) < 0)
		return (int)tail_id;
	/* the group's frames from the innermost Python one, and its key */
	memmove(g->frames, g->frames + py, (size_t)(n - py) * sizeof(*g->frames));
	nkey = (unsigned)(n - py) + 1;
	g->key[0] = (uint32_t)tail_id;
	for (unsigned i = 1; i < nkey; i++)
		g->key[i] = col->content[g->frames[i - 1]];
	for (h = hash_key(g->key, nkey);; h++) {
		uint32_t *found = mt_map_put(&g->by_hash, h, &created);
		struct group *grp;
		if (!found)
			return -ENOMEM;
		if (created) {
			if ((r = new_group(g, nkey, tail, si, stack)) < 0) {
				mt_map_del(&g->by_hash, h);
				return r;
			}
			*found = (uint32_t)r;
			break;
		}
		grp = &g->v[*found - 1];
		if (grp->nframes + 1 == nkey && !memcmp(grp->key, g->key, nkey * sizeof(*g->key))) {
			r = (int)*found;
			/* the representative: the smallest stack met */
			if (skey < ((uint64_t)grp->rep_instance << 32 | grp->rep_stack)) {
				grp->rep_instance = si;
				grp->rep_stack = stack;
			}
			break;
		}
	}
	/* the next stack with the same frames from its first activation out needs only those
	 * inside it (a stack cut at MAX_FRAMES is not one to go by) */
	if (at.node && !known && py == before && whole < MAX_FRAMES) {
		struct resumed *e = mt_map_put(&g->resumed, resume_key, &created);
		if (!e)
			return -ENOMEM;
		*e = (struct resumed){at.pystack,
		                      si,
		                      at.node,
		                      at.inlined,
		                      (uint32_t)tail_id,
		                      (uint32_t)r,
		                      (uint32_t)(whole - py)};
	}
done:
	if (!(slot = mt_map_put(&g->of_stack, skey, &created)))
		return -ENOMEM;
	*slot = (uint32_t)r;
	return r;
}

int mt_analysis_group_frames(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                             struct mt_sym *out, unsigned max)
{
	int g = group_of(a, stack_instance, stack);
	const struct group *grp;
	unsigned n;

	if (g <= 0)
		return g < 0 ? g : mt_analysis_native_frames(a, stack_instance, stack, out, max);
	grp = &a->groups->v[g - 1];
	n = grp->nframes < max ? grp->nframes : max;
	for (unsigned i = 0; i < n; i++)
		out[i] = mt_frames_col(a)->sym[grp->frames[i]];
	if (n)
		out[0].tail = grp->tail;
	return (int)n;
}

/* ---- rows ---- */

/* a row's place in the sort, its key inside: 700,000 rows' keys read through pointers missed */
struct entry {
	uint64_t stack; /* stack_instance << 32 | stack */
	uint32_t group; /* + 1; 0: in none */
	uint32_t row;
};

/* v's n entries in order of stack, stably: merged bottom-up through tmp (n entries). */
static void sort_by_stack(struct entry *v, struct entry *tmp, size_t n)
{
	struct entry *src = v, *dst = tmp, *t;

	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				dst[k++] = src[j].stack < src[i].stack ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
}

/*
 * The entries in order of group, then stack: counted out by group (groups
 * 0 .. ngroups), each group's then sorted by stack: one qsort of them all
 * took 4% of a torch report's instructions, and qsort's call of a
 * comparison most of what was left. -ENOMEM.
 */
static int sort_entries(struct entry **e, size_t n, uint32_t ngroups)
{
	uint32_t *at = calloc((size_t)ngroups + 2, sizeof(*at));
	struct entry *sorted = malloc((n ? n : 1) * sizeof(*sorted));
	size_t from = 0;

	if (!at || !sorted) {
		free(at);
		free(sorted);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		at[(*e)[i].group + 1]++;
	for (uint32_t g = 0; g <= ngroups; g++)
		at[g + 1] += at[g];
	/* at[g] from group g's start to its end */
	for (size_t i = 0; i < n; i++)
		sorted[at[(*e)[i].group]++] = (*e)[i];
	/* the entries as they came, no longer needed, the merges' room */
	for (uint32_t g = 0; g <= ngroups; from = at[g++])
		if (at[g] - from > 1)
			sort_by_stack(sorted + from, *e + from, at[g] - from);
	free(at);
	free(*e);
	*e = sorted;
	return 0;
}

int mt_analysis_group_rows(struct mt_analysis *a, const struct mt_stack_row *rows, size_t n,
                           struct mt_stack_row **out, size_t *nout)
{
	struct entry *e = malloc((n ? n : 1) * sizeof(*e));
	struct mt_stack_row *res;
	struct mt_stack_ref *refs;
	struct mt_leak_count(*reach)[MT_LEAK_CLASS_COUNT], *sum = NULL;
	size_t m = 0, ngroups = 0;
	int r;

	*out = NULL;
	*nout = 0;
	if (n > UINT32_MAX || !e) {
		free(e);
		return n > UINT32_MAX ? -EOVERFLOW : -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if ((r = group_of(a, rows[i].stack_instance, rows[i].stack)) < 0) {
			free(e);
			return r;
		}
		e[i] = (struct entry){(uint64_t)rows[i].stack_instance << 32 | rows[i].stack,
		                      (uint32_t)r, (uint32_t)i};
	}
	if ((r = sort_entries(&e, n, a->groups->n)) < 0) {
		free(e);
		return r;
	}
	for (size_t i = 0; i < n; i++)
		ngroups += e[i].group && (!i || e[i - 1].group != e[i].group);
	/* one block: the rows, then the stacks merged in them, then the groups' leaks by class */
	res = malloc((n ? n : 1) * (sizeof(*res) + sizeof(*refs)) + ngroups * sizeof(*reach));
	if (!res) {
		free(e);
		return -ENOMEM;
	}
	refs = (struct mt_stack_ref *)(res + (n ? n : 1));
	reach = (struct mt_leak_count(*)[MT_LEAK_CLASS_COUNT])(refs + (n ? n : 1));
	for (size_t i = 0; i < n; i++) {
		const struct mt_stack_row *row = &rows[e[i].row];
		struct mt_stack_row *o;
		refs[i] = (struct mt_stack_ref){row->stack_instance, row->stack};
		if (!e[i].group || !m || e[i - 1].group != e[i].group) {
			o = &res[m++];
			*o = *row;
			o->merged = e[i].group ? &refs[i] : NULL;
			o->nmerged = e[i].group ? 1 : 0;
			if (e[i].group) {
				const struct group *grp = &a->groups->v[e[i].group - 1];
				o->stack_instance = grp->rep_instance;
				o->stack = grp->rep_stack;
				/* its own sums, which its stacks' add to */
				sum = *reach++;
				for (int c = 0; c < MT_LEAK_CLASS_COUNT; c++)
					sum[c] = mt_stack_row_reach(row, (enum mt_leak_class)c);
				o->reach = sum;
			}
			continue;
		}
		o = &res[m - 1];
		o->nmerged++;
		o->allocations += row->allocations;
		o->bytes_allocated += row->bytes_allocated;
		o->peak_bytes += row->peak_bytes;
		o->peak_blocks += row->peak_blocks;
		o->leaked_bytes += row->leaked_bytes;
		o->leaked_blocks += row->leaked_blocks;
		for (int c = 0; c < MT_LEAK_CLASS_COUNT; c++) {
			struct mt_leak_count l = mt_stack_row_reach(row, (enum mt_leak_class)c);
			sum[c].bytes += l.bytes;
			sum[c].blocks += l.blocks;
		}
		o->temporary += row->temporary;
	}
	free(e);
	*out = res;
	*nout = m;
	return 0;
}

/* ---- growth ---- */

/*
 * A group grows by what its growing stacks grow: their live bytes at the
 * rise's start and at the end, their rates and grown bytes add up; the
 * r2 figures are those of the stack that grew most.
 */
static int group_growth(struct mt_analysis *a, struct mt_diagnosis *d)
{
	struct mt_map at; /* kind << 32 | group -> index + 1 in the merged list */
	size_t m = 0;
	int r = 0;

	mt_map_init(&at, sizeof(size_t));
	for (size_t i = 0; i < d->ngrowth; i++) {
		struct mt_growth g = d->growth[i];
		const struct group *grp;
		size_t *slot;
		bool created;
		if ((r = group_of(a, g.stack_instance, g.stack)) < 0)
			goto out;
		if (!r) {
			d->growth[m++] = g;
			continue;
		}
		grp = &a->groups->v[r - 1];
		if (!(slot = mt_map_put(&at, (uint64_t)g.kind << 32 | (uint32_t)r, &created))) {
			r = -ENOMEM;
			goto out;
		}
		g.stack_instance = grp->rep_instance;
		g.stack = grp->rep_stack;
		if (created) {
			*slot = m + 1;
			d->growth[m++] = g;
		} else {
			struct mt_growth *o = &d->growth[*slot - 1];
			if (g.grown_bytes > o->grown_bytes) {
				o->r2 = g.r2;
				o->r2_per_mark = g.r2_per_mark;
			}
			o->bytes_per_second += g.bytes_per_second;
			o->from_bytes += g.from_bytes;
			o->end_bytes += g.end_bytes;
			o->grown_bytes += g.grown_bytes;
			o->bytes_per_mark += g.bytes_per_mark;
			o->per_mark = o->per_mark || g.per_mark;
		}
	}
	d->ngrowth = m;
	mt_growth_sort(d);
	r = 0;
out:
	mt_map_free(&at);
	return r;
}

/* ---- the whole analysis ---- */

int mt_analysis_group(struct mt_analysis *a, const char *plumbing)
{
	size_t nrows = 0;
	int r;

	if (a->groups)
		return 0;
	if (!(a->groups = calloc(1, sizeof(*a->groups))))
		return -ENOMEM;
	a->groups->plumbing = plumbing;
	mt_map_init(&a->groups->of_stack, sizeof(uint32_t));
	mt_map_init(&a->groups->by_hash, sizeof(uint32_t));
	mt_map_init(&a->groups->plumbing_of, sizeof(uint8_t));
	mt_map_init(&a->groups->tail_of, sizeof(uint32_t));
	mt_map_init(&a->groups->tail_by_hash, sizeof(uint32_t));
	mt_map_init(&a->groups->resumed, sizeof(struct resumed));
	a->groups->ntails = 1; /* id 0: the empty name, kept nowhere */
	/* the rows come in the slot order of the replay's tables, which hash the same keys:
	 * of_stack sized for all of them at once, or their order makes probe runs thousands
	 * of slots long as it grows (half the report's time on an import torch trace) */
	for (uint32_t p = 0; p < a->nprocs; p++)
		for (int k = 0; k < MT_KIND_COUNT; k++)
			nrows += a->procs[p].kind[k].nrows;
	if (mt_map_reserve(&a->groups->of_stack, nrows) < 0)
		return -ENOMEM;
	/* every stack first, so that the representatives are final before rows name them */
	for (uint32_t p = 0; p < a->nprocs; p++)
		for (int k = 0; k < MT_KIND_COUNT; k++)
			for (size_t i = 0; i < a->procs[p].kind[k].nrows; i++) {
				const struct mt_stack_row *row = &a->procs[p].kind[k].rows[i];
				if ((r = group_of(a, row->stack_instance, row->stack)) < 0)
					return r;
			}
	for (uint32_t p = 0; p < a->nprocs; p++) {
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			struct mt_kind_result *kr = &a->procs[p].kind[k];
			struct mt_stack_row *rows;
			size_t n;
			if ((r = mt_analysis_group_rows(a, kr->rows, kr->nrows, &rows, &n)) < 0)
				return r;
			kr->stack_rows = kr->rows;
			kr->nstack_rows = kr->nrows;
			kr->rows = rows;
			kr->nrows = n;
		}
		if ((r = group_growth(a, &a->procs[p].diag)) < 0)
			return r;
	}
	return 0;
}

void mt_analysis_drop_stack_rows(struct mt_analysis *a)
{
	for (uint32_t p = 0; p < a->nprocs; p++)
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			free(a->procs[p].kind[k].stack_rows);
			a->procs[p].kind[k].stack_rows = NULL;
			a->procs[p].kind[k].nstack_rows = 0;
		}
}

int mt_analysis_representative(struct mt_analysis *a, uint32_t *stack_instance, uint32_t *stack)
{
	int g = a->groups ? group_of(a, *stack_instance, *stack) : 0;

	if (g > 0) {
		*stack_instance = a->groups->v[g - 1].rep_instance;
		*stack = a->groups->v[g - 1].rep_stack;
	}
	return g < 0 ? g : 0;
}

bool mt_analysis_has_groups(const struct mt_analysis *a)
{
	return a->groups && a->groups->n;
}

void mt_groups_free(struct mt_groups *g)
{
	if (!g)
		return;
	for (uint32_t i = 0; i < g->n; i++) {
		free(g->v[i].key);
		free(g->v[i].frames);
		free(g->v[i].tail);
	}
	for (uint32_t i = 1; i < g->ntails; i++)
		free(g->tails[i]);
	free(g->tails);
	free(g->label_class);
	free(g->v);
	mt_map_free(&g->of_stack);
	mt_map_free(&g->by_hash);
	mt_map_free(&g->plumbing_of);
	mt_map_free(&g->tail_of);
	mt_map_free(&g->tail_by_hash);
	mt_map_free(&g->resumed);
	free(g);
}
