/* SPDX-License-Identifier: MIT */
/*
 * The frames of stacks, each kept once (see frames.h). A native address's
 * frames (more than one where calls were inlined) sit side by side in the
 * table with what the walk over a stack asks of each (memtrace's own, the
 * allocator's, an interpreter activation) decided when they were added; a
 * Python frame is kept once per code object and line. A content is looked
 * up by a hash of its strings, numbers and place, compared in full on a
 * match.
 *
 * May not: print; keep anything of a stack but its frames.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "grow.h"
#include "map.h"
#include "prefetch.h"
#include "pyframes.h"
#include "pystacks.h"

/* frames.c's own flags, beside MT_FRAME_PYTHON */
#define F_MEMTRACE  2u /* in libmemtrace.so: never shown */
#define F_ALLOCATOR 4u /* the allocator's own: dropped while leading */
#define F_EVAL      8u /* an interpreter activation, for its Python frames */

/* inlined frames a return address expands to, at most */
#define MAX_INLINED 32

/* A native address's frames: the table's first .. first + n - 1. */
struct run {
	uint32_t first;
	uint16_t n;
	/* whether a frame of it is F_MEMTRACE, F_ALLOCATOR or F_EVAL: most are none, taken as
	 * they are without their flags read */
	bool special;
};

struct instance_frames {
	uint32_t id;
	struct mt_map addrs; /* return address -> struct run */
	/*
	 * a PYSTACK's frames, by where the replay keeps them (they do not move once its first
	 * pass is done, before any stack is asked for) -> uint64_t index into f->py_idx of
	 * their frames' indices: a tenth of a torch trace's 12 million Python frames
	 */
	struct mt_map pystacks;
};

/* ---- contents ---- */

static uint64_t hash_str(uint64_t h, const char *s)
{
	/* NULL and "" alike, and each string's end marked, as group keys were */
	for (s = s ? s : ""; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h * 1099511628211ull;
}

static uint64_t hash_u64(uint64_t h, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		h = (h ^ (v & 0xff)) * 1099511628211ull;
	return h;
}

/* Where an unnamed frame is: its offset in its module, or its address outside any. */
static uint64_t place(const struct mt_sym *s)
{
	return s->function ? 0 : s->module ? s->offset : s->address;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || !strcmp(a ? a : "", b ? b : "");
}

static bool same_content(const struct mt_sym *a, const struct mt_sym *b)
{
	return a->line == b->line && place(a) == place(b) && str_eq(a->function, b->function) &&
	       str_eq(a->file, b->file) && str_eq(a->module, b->module);
}

/* The content id of s, made for frame `frame` when s is the first with it. */
static int content_of(struct mt_frames *f, const struct mt_sym *s, uint32_t frame)
{
	uint64_t h = 14695981039346656037ull;
	uint32_t *slot;
	bool created;

	h = hash_str(h, s->function);
	h = hash_str(h, s->file);
	h = hash_str(h, s->module);
	h = hash_u64(hash_u64(h, s->line), place(s));
	for (;; h++) {
		if (!(slot = mt_map_put(&f->contents, h, &created)))
			return -ENOMEM;
		if (!created) {
			if (same_content(&f->col.sym[f->content_frame[*slot - 1]], s))
				return (int)(*slot - 1);
			continue;
		}
		if (mt_grow((void **)&f->content_frame, &f->contents_cap, (size_t)f->ncontents + 1,
		            sizeof(*f->content_frame)) < 0) {
			mt_map_del(&f->contents, h);
			return -ENOMEM;
		}
		f->content_frame[f->ncontents] = frame;
		*slot = ++f->ncontents;
		return (int)(*slot - 1);
	}
}

/* A new frame of the table: its index, or a negative errno. */
static int64_t add_frame(struct mt_frames *f, const struct mt_sym *s, uint8_t flags)
{
	int content;

	if (mt_grow((void **)&f->col.sym, &f->cap[0], (size_t)f->n + 1, sizeof(*f->col.sym)) < 0 ||
	    mt_grow((void **)&f->col.content, &f->cap[1], (size_t)f->n + 1,
	            sizeof(*f->col.content)) < 0 ||
	    mt_grow((void **)&f->col.flags, &f->cap[2], (size_t)f->n + 1, sizeof(*f->col.flags)) <
	            0)
		return -ENOMEM;
	f->col.sym[f->n] = *s;
	f->col.flags[f->n] = flags;
	if ((content = content_of(f, s, f->n)) < 0)
		return content;
	f->col.content[f->n] = (uint32_t)content;
	return f->n++;
}

/* ---- native frames ---- */

static bool in_memtrace(const char *module)
{
	const char *base;

	if (!module)
		return false;
	base = strrchr(module, '/');
	base = base ? base + 1 : module;
	return !strncmp(base, "libmemtrace.so", 14) || !strncmp(base, "libmemtrace-", 12);
}

/*
 * The allocator's own frames: C++ operator new and new[], demangled or not,
 * and, for what the CUPTI module saw, CUPTI and the CUDA driver below the
 * driver call.
 */
static bool is_allocator(const struct mt_sym *s)
{
	const char *f = s->function, *base = s->module ? strrchr(s->module, '/') : NULL;

	base = base ? base + 1 : s->module;
	if (base && (!strncmp(base, "libcupti.so", 11) || !strncmp(base, "libcuda.so", 10)))
		return true;
	return f && (!strncmp(f, "operator new", 12) || !strncmp(f, "_Znw", 4) ||
	             !strncmp(f, "_Zna", 4));
}

/* The native frame of one interpreter activation: CPython's, or a compiler's clone of it. */
static bool is_eval_frame(const struct mt_sym *s)
{
	static const char eval[] = "_PyEval_EvalFrameDefault";

	return s->function && !strncmp(s->function, eval, sizeof(eval) - 1) &&
	       (s->function[sizeof(eval) - 1] == 0 || s->function[sizeof(eval) - 1] == '.');
}

static uint8_t native_flags(const struct mt_sym *s)
{
	return (uint8_t)((s->module && !strcmp(s->module, "python") ? MT_FRAME_PYTHON : 0) |
	                 (in_memtrace(s->module) ? F_MEMTRACE : 0) |
	                 (is_allocator(s) ? F_ALLOCATOR : 0) | (is_eval_frame(s) ? F_EVAL : 0));
}

/* The table of an instance's native addresses, made on its first stack. */
static struct instance_frames *instance_frames(struct mt_frames *f, uint32_t id)
{
	uint32_t *slot;
	bool created;

	if (!(slot = mt_map_put(&f->instances, id, &created)))
		return NULL;
	if (!created)
		return &f->inst[*slot - 1];
	if (mt_grow((void **)&f->inst, &f->inst_cap, (size_t)f->ninst + 1, sizeof(*f->inst)) < 0) {
		mt_map_del(&f->instances, id);
		return NULL;
	}
	f->inst[f->ninst].id = id;
	mt_map_init(&f->inst[f->ninst].addrs, sizeof(struct run));
	mt_map_init(&f->inst[f->ninst].pystacks, sizeof(uint64_t));
	*slot = ++f->ninst;
	return &f->inst[f->ninst - 1];
}

/* The run of a return address met before, or NULL: inline, since 35 million frames ask. */
static inline const struct run *known_run(const struct instance_frames *inf, uint64_t address)
{
	return mt_map_get_small(&inf->addrs, address, MT_MAP_SHIFT(sizeof(struct run)),
	                        MT_MAP_VOFF(sizeof(struct run)));
}

/* The frames of a return address of instance `in` met the first time, symbolized. */
static int new_run(struct mt_analysis *a, struct instance_frames *inf, const struct mt_instance *in,
                   uint64_t address, struct run *out)
{
	struct mt_frames *f = a->frames;
	struct mt_sym tmp[MAX_INLINED];
	struct run *r, run;
	bool created;
	int got;

	got = mt_symbolize(a->sym, in, address, tmp, MAX_INLINED);
	if (got <= 0) {
		memset(tmp, 0, sizeof(tmp[0]));
		tmp[0].address = address;
		got = 1;
	}
	run = (struct run){f->n, (uint16_t)got, false};
	for (int j = 0; j < got; j++) {
		uint8_t flags = native_flags(&tmp[j]);
		if (add_frame(f, &tmp[j], flags) < 0)
			return -ENOMEM; /* its only error */
		run.special = run.special || (flags & (F_MEMTRACE | F_ALLOCATOR | F_EVAL));
	}
	if (!(r = mt_map_put(&inf->addrs, address, &created)))
		return -ENOMEM;
	*out = *r = run;
	return 0;
}

/* ---- Python frames ---- */

/*
 * The frame of s, a Python frame: one per code object's strings (by
 * address, as the commands met them before the table: the viewer and
 * flamegraph key their memos by them) and line.
 */
static int64_t python_same(struct mt_frames *f, const struct mt_sym *s)
{
	uint64_t h = ((uint64_t)(uintptr_t)s->function * 31 + (uintptr_t)s->file) * 31 + s->line;
	uint32_t *slot;
	bool created;
	int64_t i;

	for (;; h++) {
		const struct mt_sym *o;
		if (!(slot = mt_map_put(&f->python_of, h, &created)))
			return -ENOMEM;
		if (created)
			break;
		o = &f->col.sym[*slot - 1];
		if (o->function == s->function && o->file == s->file && o->line == s->line)
			return *slot - 1;
	}
	if ((i = add_frame(f, s, MT_FRAME_PYTHON)) < 0) {
		mt_map_del(&f->python_of, h);
		return i;
	}
	*slot = (uint32_t)i + 1; /* add_frame puts nothing in python_of: the pointer holds */
	return i;
}

/*
 * A Python frame as an ordinary one (docs/json-report.md): its code
 * object's qualified name, file and line, module "python". A code object
 * the trace does not describe (id 0: one the capture could not read) is
 * "<unknown Python frame>".
 */
static int64_t python_frame(struct mt_analysis *a, uint32_t stack_instance,
                            const struct mt_pyframe *py)
{
	struct mt_frames *f = a->frames;
	const struct mt_pycode *c = mt_replay_pycode(a->replay, stack_instance, py->code);
	struct mt_sym s = {.function = "<unknown Python frame>", .module = "python"};
	uint32_t *slot = NULL;
	int64_t line, i;
	bool created;

	if (c && py->lasti < (1u << 19) && (uintptr_t)c < ((uint64_t)1 << 48)) {
		slot = mt_map_put(&f->python, (uint64_t)(uintptr_t)c >> 3 << 19 | py->lasti,
		                  &created);
		if (!slot)
			return -ENOMEM;
		if (!created)
			return *slot - 1;
	}
	if (c) {
		line = mt_pyframe_line(c->version, (int64_t)c->first_line, c->linetable,
		                       c->linetable_len, py->lasti);
		s.function = c->name;
		s.file = c->file;
		s.line = line > 0 && line <= UINT32_MAX ? (uint32_t)line : 0;
	}
	if ((i = python_same(f, &s)) < 0) {
		if (slot)
			mt_map_del(&f->python, (uint64_t)(uintptr_t)c >> 3 << 19 | py->lasti);
		return i;
	}
	if (slot)
		*slot = (uint32_t)i + 1;
	return i;
}

/* The frames of a stack's PYSTACK (py, npy of them), made on its first stack, in *out. */
static int pystack_frames(struct mt_analysis *a, struct instance_frames *inf,
                          uint32_t stack_instance, const struct mt_pyframe *py, uint32_t npy,
                          const uint32_t **out)
{
	struct mt_frames *f = a->frames;
	uint64_t *at = mt_map_get(&inf->pystacks, (uint64_t)(uintptr_t)py);
	size_t first = f->npy_idx;
	bool created;

	if (at) {
		*out = f->py_idx + *at;
		return 0;
	}
	if (mt_grow((void **)&f->py_idx, &f->py_idx_cap, f->npy_idx + npy, sizeof(*f->py_idx)) < 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < npy; i++) {
		int64_t idx = python_frame(a, stack_instance, &py[i]);
		if (idx < 0)
			return (int)idx;
		f->py_idx[first + i] = (uint32_t)idx;
	}
	if (!(at = mt_map_put(&inf->pystacks, (uint64_t)(uintptr_t)py, &created)))
		return -ENOMEM;
	*at = first;
	f->npy_idx += npy;
	*out = f->py_idx + first;
	return 0;
}

/*
 * Python frames in place of an eval frame: those of one activation, from
 * *next up to and including the next entry frame (all that are left when
 * none is). Returns how many it wrote at out[*count].
 */
static unsigned python_activation(const struct mt_pyframe *py, const uint32_t *idx, uint32_t npy,
                                  uint32_t *next, uint32_t *out, unsigned *count, unsigned max)
{
	unsigned wrote = 0;

	while (*next < npy && *count < max) {
		bool entry = py[*next].entry;
		out[(*count)++] = idx[(*next)++];
		wrote++;
		if (entry)
			break;
	}
	return wrote;
}

/* ---- stacks ---- */

/* The analysis's table, made on its first stack; NULL without memory. */
static struct mt_frames *frames_made(struct mt_analysis *a)
{
	struct mt_frames *f = a->frames;

	if (f || !(f = calloc(1, sizeof(*f))))
		return f;
	mt_map_init(&f->contents, sizeof(uint32_t));
	mt_map_init(&f->python, sizeof(uint32_t));
	mt_map_init(&f->python_of, sizeof(uint32_t));
	mt_map_init(&f->instances, sizeof(uint32_t));
	return a->frames = f;
}

/*
 * mt_frames_of_stack, or with `at` its frames up to its first Python
 * activation (mt_frames_until_python).
 */
static int frames_of(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack, uint32_t *out,
                     unsigned max, struct mt_frames_at *at)
{
	const struct mt_instance *in = mt_replay_find_instance(a->replay, stack_instance);
	const struct mt_pyframe *py = NULL;
	const uint32_t *py_idx = NULL;
	struct instance_frames *inf;
	struct mt_frame_walk walk;
	uint64_t frame;
	uint32_t node, npy = 0, next = 0;
	unsigned count = 0;
	bool leading = true;
	int r;

	if (at)
		*at = (struct mt_frames_at){0};
	/* the table even for no frames: a caller reads its columns after any call */
	if (!frames_made(a))
		return -ENOMEM;
	if (!in || mt_replay_stack_walk(a->replay, stack_instance, stack, &walk) < 0)
		return 0;
	mt_replay_pystack(a->replay, stack_instance, stack, &py, &npy);
	if (a->prefetch) { /* what it opened, if it is done */
		a->sym = mt_prefetch_take(a->prefetch);
		a->prefetch = NULL;
	}
	if (!a->sym && (r = mt_symbolizer_new(&a->sym)) < 0) {
		a->sym = NULL;
		return r;
	}
	if (!(inf = instance_frames(a->frames, stack_instance)))
		return -ENOMEM;
	if (npy && (r = pystack_frames(a, inf, stack_instance, py, npy, &py_idx)) < 0)
		return r;
	/* the frames read as they are needed: up to the first activation, 21 of a torch
	 * stack's 57 on average */
	while (count < max && mt_frame_walk_next(&walk, &frame, &node)) {
		const struct run *known = known_run(inf, frame);
		struct run run;
		if (known)
			run = *known;
		else if ((r = new_run(a, inf, in, frame, &run)) < 0)
			return r;
		if (!run.special) {
			for (uint32_t j = run.first; j < run.first + run.n && count < max; j++)
				out[count++] = j;
			leading = false;
			continue;
		}
		for (uint32_t j = run.first; j < run.first + run.n && count < max; j++) {
			uint8_t flags = a->frames->col.flags[j];
			if (flags & F_MEMTRACE)
				continue;
			if (leading && (flags & F_ALLOCATOR))
				continue;
			leading = false;
			if (at && (flags & F_EVAL) && next < npy) {
				/* the first activation: what follows is the same for every stack
				 * with this node and place and these Python frames */
				at->pystack = py;
				at->node = node;
				at->inlined = j - run.first;
				return (int)count;
			}
			/* the hybrid stack: an eval frame with no Python frames left stays */
			if ((flags & F_EVAL) &&
			    python_activation(py, py_idx, npy, &next, out, &count, max))
				continue;
			out[count++] = j;
		}
	}
	/* a native stack cut short of the interpreter's outer activations: theirs go last */
	while (next < npy && count < max)
		out[count++] = py_idx[next++];
	return (int)count;
}

int mt_frames_of_stack(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                       uint32_t *out, unsigned max)
{
	return frames_of(a, stack_instance, stack, out, max, NULL);
}

int mt_frames_until_python(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                           uint32_t *out, unsigned max, struct mt_frames_at *at)
{
	return frames_of(a, stack_instance, stack, out, max, at);
}

int mt_analysis_native_frames(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                              struct mt_sym *out, unsigned max)
{
	struct mt_frames *f;
	int n;

	if (!(f = frames_made(a)))
		return -ENOMEM;
	if (f->scratch_cap < max) {
		void *p = realloc(f->scratch, max * sizeof(*f->scratch));
		if (!p)
			return -ENOMEM;
		f->scratch = p;
		f->scratch_cap = max;
	}
	n = mt_frames_of_stack(a, stack_instance, stack, f->scratch, max);
	for (int i = 0; i < n; i++)
		out[i] = f->col.sym[f->scratch[i]];
	return n;
}

void mt_frames_free(struct mt_frames *f)
{
	if (!f)
		return;
	for (uint32_t i = 0; i < f->ninst; i++) {
		mt_map_free(&f->inst[i].addrs);
		mt_map_free(&f->inst[i].pystacks);
	}
	free(f->py_idx);
	free(f->inst);
	free(f->col.sym);
	free(f->col.content);
	free(f->col.flags);
	free(f->content_frame);
	free(f->scratch);
	mt_map_free(&f->contents);
	mt_map_free(&f->python);
	mt_map_free(&f->python_of);
	mt_map_free(&f->instances);
	free(f);
}
