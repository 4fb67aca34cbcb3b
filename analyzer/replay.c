/* SPDX-License-Identifier: MIT */
/*
 * Replay (see replay.h): the first pass collects instances, stacks, modules
 * and each thread's chunk list; the second replays each instance through a
 * table of live blocks.
 *
 * Host blocks live in a hash map by address. Anonymous mappings live in an
 * array of disjoint ranges sorted by address, because munmap and mremap
 * work on ranges: they trim, split and remove whatever they overlap. An
 * ALLOC whose FREE is the instance's next event (the feed marks it) is
 * applied with it at once wherever that leaves the same state (apply_pair):
 * such a block never enters the live set.
 *
 * Per-stack figures at the peak are kept lazily: a new peak of a kind only
 * bumps that kind's epoch; a stack's entry copies its live figures into
 * peak_* the next time it changes after the epoch moved (its figures had
 * not changed since the peak, so they are the ones at the peak), and once
 * more at the end. That makes the peak snapshot O(1) per event.
 *
 * The growth fit's sums are kept lazily the same way: a checkpoint (32
 * evenly spaced moments and every MARK) only appends its x to a prefix-sum
 * array; a stack's entry adds its live bytes, unchanged since it was last
 * synced, for all checkpoints passed since then, the next time it changes,
 * and once more at the end; likewise the floors of the growth series'
 * windows those checkpoints fall in (at most MT_GROWTH_WINDOWS). A
 * checkpoint is O(1), an event O(1) more. Most stacks hold nothing at any
 * checkpoint (a torch run's: 487,000 of 702,000), and their growth figures
 * stay zero: a stack gets its growth record the first time it syncs a
 * non-zero live, and until then its figures follow from how many
 * checkpoints it synced (stat_growth_view), 176 bytes a stack saved.
 *
 * May not: print; hold more than one chunk per thread of the instance being
 * replayed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "by-stack.h"
#include "feed.h"
#include "frame-tree.h"
#include "heap-pages.h"
#include "keyframes.h"
#include "map.h"
#include "pystacks.h"
#include "replay.h"
#include "sampling.h"

/* munmap and mremap work in pages; 4096 is the smallest page of the writer's machines. */
#define PAGE_ROUND 4096u

struct stack_entry {
	uint32_t node; /* its innermost frame's in priv->frames */
	uint32_t gen;
};

struct thread {
	uint32_t tid;
	uint64_t *chunks; /* chunk indices in file order */
	size_t n, cap;
};

/*
 * A live block: stat, its (stack, kind) figures' index in the owner's stat
 * arrays, which say its stack and kind, so that a free finds them without a
 * look-up; blocks, the blocks it stands for, more than 1 when sampled
 * (sampling.h), see block_bytes.
 */
struct block_val {
	uint64_t size;
	uint32_t stat;
	uint32_t blocks;
};

/*
 * A live block as the live set's map holds it: 8 bytes, so that a slot with
 * its key is 16 (the ring's consumer keeps every live block of every
 * process). A block of 4 GiB or more, or that stands for more than one,
 * has size HOST_BIG here and its size and blocks in the live set's `big`.
 */
struct host_block {
	uint32_t stat;
	uint32_t size;
};
#define HOST_BIG UINT32_MAX
/*
 * In a host block's stat: its pages are not counted yet (struct live's
 * young). Stat indices stay below it (stats_grow).
 */
#define HOST_YOUNG (1u << 31)

struct big_block {
	uint64_t size, blocks;
};

/* The layout of the live set's slots, for the map's inline operations. */
#define HOST_SHIFT MT_MAP_SHIFT(sizeof(struct host_block))
#define HOST_VOFF  MT_MAP_VOFF(sizeof(struct host_block))

/*
 * The figures of one (stack, kind) that every event of it changes: one
 * cache line, apart from the growth sums and floors (struct stat_growth),
 * which change only when a checkpoint passed.
 */
struct stat_hot {
	uint64_t live_bytes, live_blocks;
	uint64_t allocations, bytes_allocated;
	uint64_t peak_bytes, peak_blocks;
	uint64_t epoch; /* the peak generation peak_* was last brought up to */
	uint32_t kind;
};

/*
 * The growth figures of a (stack, kind) that held something at a
 * checkpoint: those of struct mt_stack_stats (which say what they mean)
 * but the synced counts, which follow from the checkpoints it synced
 * (struct stat_sync): the marks among them in cp_marks, the series'
 * positions from those.
 */
struct stat_growth {
	mt_u128 t_sy, t_sxy, t_syy;
	mt_u128 m_sy, m_sxy, m_syy;
	uint64_t first_bytes;
	uint64_t floor[MT_GROWTH_WINDOWS];
	uint64_t last;
};

/*
 * Where a (stack, kind)'s growth figures stand: checkpoints, the
 * checkpoints.n they include; growth, its record's index in growth + 1, or
 * 0 while it has none (its figures are zero: it held nothing at any of
 * them).
 */
struct stat_sync {
	uint32_t checkpoints;
	uint32_t growth;
};

/* Whose stack a (stack, kind)'s figures are, for a block's walk and a fork's seed. */
struct stat_id {
	uint32_t stack, stack_instance;
};

struct range {
	uint64_t addr, len;
	uint32_t stack;
	uint32_t stack_instance;
};

struct live {
	struct mt_map host; /* mt_block_key -> struct host_block */
	/* the same key -> struct big_block, for a block whose size is HOST_BIG there */
	struct mt_map big;
	/* whose stat arrays the blocks' stat indices are in: the instance replayed, or the
	 * parent a forked child's seed was copied from until the child takes it */
	struct mt_instance_priv *owner;
	struct range *ranges;
	size_t nranges, cap;
	struct mt_heap_pages pages; /* of the live MT_KIND_HOST blocks but the young */
	/*
	 * The host blocks allocated since the pages were last brought up to
	 * date (pages_catch_up), by address, each marked HOST_YOUNG in the live
	 * set: only a sample reads the pages, and most blocks are freed before
	 * the next one, so that their pages are never counted nor uncounted. An
	 * address may be here more than once (freed and handed out again) or
	 * for a block gone: the mark says which entry stands for a live block.
	 * Caught up at a sample, before a copy, and when it holds as many as
	 * the live set (memory stays with live blocks).
	 */
	uint64_t *young;
	uint32_t nyoung, young_cap;
};

struct mt_instance_priv {
	struct mt_map stacks;        /* id -> struct stack_entry */
	struct mt_frame_tree frames; /* every stack's, sealed after the first pass */
	struct mt_pystacks py;       /* code objects, Python stacks, and the one each stack names */
	struct mt_map thread_index;  /* tid -> index into threads */
	struct thread *threads;
	uint32_t nthreads, threads_cap;
	/* stack_instance << 32 | stack -> uint32_t, an index into hot, ids and synced; a lean
	 * replay's holds other instances' stacks only, its own_stat the rest */
	struct mt_map stat_index[MT_KIND_COUNT];
	/* while replaying, the same for the instance's own stacks by id, + 1: no hashing */
	struct mt_by_stack own_stat[MT_KIND_COUNT];
	struct stat_hot *hot; /* 64-byte aligned */
	struct stat_id *ids;
	/* where each one's growth figures stand: apart, so that a fetch ahead sees whether
	 * its event will bring them up to date (an array that stays in a cache close to the
	 * core, an eighth of hot); NULL when lean (no checkpoints.n but 0) */
	struct stat_sync *synced;
	uint32_t nstats, stats_cap;
	/* the growth records, made as stacks first hold something at a checkpoint (NULL when
	 * lean), and whether one could not be made: the replay fails at the instance's end */
	struct stat_growth *growth;
	uint32_t ngrowth, growth_cap;
	bool growth_failed;
	uint64_t epoch[MT_KIND_COUNT];
	/* host + mmap bytes live before the last change of them, and whether the last
	 * sample waits for the first change after it (mt_sample_point.traced_max) */
	uint64_t traced_before_last;
	bool sample_waits;
	/* the most host + mmap bytes live since the last sample, which its traced_until_next
	 * takes at the next sample and at the end (traced_fold): a change compares once */
	uint64_t traced_most;
	struct live *live; /* during replay */
	struct live *seed; /* a forked child's copy of its parent's live set */
	/* copies of live made for children not replayed yet, which read these figures, and
	 * whether the instance_done callback is over: then no one else does (stats_release) */
	uint32_t seeds_out;
	bool stats_done;
	uint32_t *children; /* indices of the instances forked from this one */
	uint32_t nchildren, children_cap;
	uint32_t modules_cap;
	/* the latest EXEC, and the latest record that is neither an EXEC nor a SAMPLE, by (time,
	 * offset): replay order. The EXEC ended the process image unless the other is later. */
	uint64_t exec_time, exec_offset;
	uint64_t last_time, last_offset;
	bool have_last;
	uint64_t now;
	uint64_t first_time; /* the earliest record's ticks (an instance may lack its PROCESS) */
	/* growth checkpoints: prefix sums of their x, cp_px[i] = x_0 + ... + x_(i-1); and
	 * cp_marks[i], the MARKs among the first i (the rest are evenly spaced ones) */
	mt_u128 *cp_px;
	uint32_t *cp_marks;
	uint32_t cp_cap;
	uint32_t next_even; /* evenly spaced checkpoints taken so far */
	/* the next one's ticks, UINT64_MAX after the last: a 128-bit division per event is
	 * too dear to compute it each time */
	uint64_t next_even_tick;
	uint64_t even_start, even_end;
	uint64_t samples_cap;
	uint32_t marks_cap;
	const struct mt_clock_fit *fit;
	const struct mt_keyframe *kf; /* a ring's: where the replay starts (keyframes.h) */
	/* the ring's consumer: no heap pages, and no growth figures (synced, growth): a keyframe
	 * holds neither, and its memory is per block and per stack's hot figures */
	bool lean;
};

struct mt_replay {
	const struct mt_trace *trace;
	struct mt_instance *instances;
	uint32_t ninstances, cap;
	struct mt_map index; /* id -> index into instances (valid after sorting) */
	struct mt_trace_stats stats;
	struct mt_clock_fit fit;
	struct mt_keyframes kf;
	bool kf_read; /* kf is final: instances may point into it */
	enum mt_replay_thread thread;
};

/* ---- first pass ---- */

static char *dup_bytes(struct mt_bytes b, bool cmdline)
{
	char *s = mt_bytes_dup(b);

	if (s && cmdline) {
		/* arguments are NUL-separated; the last NUL ends them */
		uint32_t n = b.len;
		while (n > 0 && s[n - 1] == 0)
			n--;
		for (uint32_t i = 0; i < n; i++)
			if (s[i] == 0)
				s[i] = ' ';
		s[n] = 0;
	}
	return s;
}

static struct mt_instance *get_instance(struct mt_replay *r, uint32_t id)
{
	uint32_t *idx;
	struct mt_instance *in;
	bool created;

	idx = mt_map_put(&r->index, id, &created);
	if (!idx)
		return NULL;
	if (!created)
		return &r->instances[*idx];
	if (r->ninstances == r->cap) {
		uint32_t cap = r->cap ? r->cap * 2 : 8;
		void *p = realloc(r->instances, cap * sizeof(*r->instances));
		if (!p) {
			mt_map_del(&r->index, id);
			return NULL;
		}
		r->instances = p;
		r->cap = cap;
	}
	in = &r->instances[r->ninstances];
	memset(in, 0, sizeof(*in));
	in->priv = calloc(1, sizeof(*in->priv));
	if (!in->priv) {
		mt_map_del(&r->index, id);
		return NULL;
	}
	mt_map_init(&in->priv->stacks, sizeof(struct stack_entry));
	mt_frame_tree_init(&in->priv->frames);
	mt_pystacks_init(&in->priv->py);
	mt_map_init(&in->priv->thread_index, sizeof(uint32_t));
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		mt_map_init(&in->priv->stat_index[k], sizeof(uint32_t));
		mt_by_stack_init(&in->priv->own_stat[k]);
	}
	in->id = id;
	if (r->kf_read)
		in->priv->kf = mt_keyframes_of(&r->kf, id);
	*idx = r->ninstances++;
	return in;
}

static int add_chunk(struct mt_instance *in, const struct mt_chunk *ch)
{
	struct mt_instance_priv *p = in->priv;
	struct thread *t;
	uint32_t *idx;
	bool created;

	idx = mt_map_put(&p->thread_index, ch->tid, &created);
	if (!idx)
		return -ENOMEM;
	if (created) {
		if (p->nthreads == p->threads_cap) {
			uint32_t cap = p->threads_cap ? p->threads_cap * 2 : 4;
			void *q = realloc(p->threads, cap * sizeof(*p->threads));
			if (!q) {
				mt_map_del(&p->thread_index, ch->tid);
				return -ENOMEM;
			}
			p->threads = q;
			p->threads_cap = cap;
		}
		*idx = p->nthreads;
		memset(&p->threads[p->nthreads], 0, sizeof(struct thread));
		p->threads[p->nthreads++].tid = ch->tid;
	}
	t = &p->threads[*idx];
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4;
		void *q = realloc(t->chunks, cap * sizeof(*t->chunks));
		if (!q)
			return -ENOMEM;
		t->chunks = q;
		t->cap = cap;
	}
	t->chunks[t->n++] = ch->index;
	in->chunks++;
	in->threads = p->nthreads;
	return 0;
}

static int add_stack(struct mt_instance *in, const struct mt_record *rec)
{
	struct mt_instance_priv *p = in->priv;
	struct stack_entry *e;
	uint32_t node;
	bool created;
	int ret;

	if (rec->u.stack.id > UINT32_MAX)
		return 0; /* ids are u32 in events' eyes; such a stack is never referred to */
	e = mt_map_put(&p->stacks, rec->u.stack.id, &created);
	if (!e)
		return -ENOMEM;
	if (!created)
		return 0; /* written once per instance; a repeat adds nothing */
	if ((ret = mt_frame_tree_add(&p->frames, rec->u.stack.frames, rec->u.stack.n, &node)) < 0) {
		mt_map_del(&p->stacks, rec->u.stack.id);
		return ret;
	}
	e->node = node;
	e->gen = (uint32_t)rec->u.stack.gen;
	in->stack_count++;
	return mt_pystacks_add_stack(&p->py, (uint32_t)rec->u.stack.id, rec);
}

static int add_module(struct mt_instance *in, const struct mt_record *rec)
{
	struct mt_module *m;

	if (in->nmodules == in->priv->modules_cap) {
		uint32_t cap = in->priv->modules_cap ? in->priv->modules_cap * 2 : 16;
		void *q = realloc(in->modules, cap * sizeof(*in->modules));
		if (!q)
			return -ENOMEM;
		in->modules = q;
		in->priv->modules_cap = cap;
	}
	m = &in->modules[in->nmodules];
	memset(m, 0, sizeof(*m));
	m->time = rec->time;
	m->base = rec->u.module.base;
	m->path = dup_bytes(rec->u.module.path, false);
	m->nseg = rec->u.module.nseg;
	m->seg = malloc((m->nseg ? m->nseg : 1) * sizeof(*m->seg));
	if (!m->path || !m->seg) {
		free(m->path);
		free(m->seg);
		return -ENOMEM;
	}
	memcpy(m->seg, rec->u.module.seg, m->nseg * sizeof(*m->seg));
	m->build_id_len = rec->u.module.build_id.len;
	if (m->build_id_len)
		memcpy(m->build_id, rec->u.module.build_id.data, m->build_id_len);
	in->nmodules++;
	return 0;
}

/* (time, offset) a comes after (time, offset) b in replay order. */
static bool later(uint64_t a_time, uint64_t a_offset, uint64_t b_time, uint64_t b_offset)
{
	return a_time > b_time || (a_time == b_time && a_offset > b_offset);
}

/*
 * Keeps the latest EXEC (its program in in->exec_path until link_instances
 * decides) and the latest record that can show the exec failed. A SAMPLE
 * cannot: the sampler thread may finish one after an exec that succeeds,
 * before the kernel ends it.
 */
static int note_exec(struct mt_instance *in, const struct mt_record *rec)
{
	struct mt_instance_priv *p = in->priv;

	if (rec->type == MT_REC_SAMPLE)
		return 0;
	if (rec->type != MT_REC_EXEC) {
		if (!p->have_last || later(rec->time, rec->offset, p->last_time, p->last_offset)) {
			p->last_time = rec->time;
			p->last_offset = rec->offset;
			p->have_last = true;
		}
		return 0;
	}
	if (in->exec_path && !later(rec->time, rec->offset, p->exec_time, p->exec_offset))
		return 0;
	free(in->exec_path);
	in->exec_path = dup_bytes(rec->u.exec.path, false);
	p->exec_time = rec->time;
	p->exec_offset = rec->offset;
	return in->exec_path ? 0 : -ENOMEM;
}

/* What first_pass_record would make of the events mt_cursor_skim passed over, one by one. */
static void first_pass_events(struct mt_replay *r, struct mt_instance *in, const struct mt_skim *s)
{
	struct mt_instance_priv *p = in->priv;

	if (!s->events)
		return;
	if (!p->have_last ||
	    later(s->latest_time, s->latest_offset, p->last_time, p->last_offset)) {
		p->last_time = s->latest_time;
		p->last_offset = s->latest_offset;
		p->have_last = true;
	}
	if (!in->records || s->first_time < p->first_time)
		p->first_time = s->first_time;
	if (s->last_time > in->end_time)
		in->end_time = s->last_time;
	in->records += s->events;
	in->events += s->events;
	r->stats.records += s->events;
	r->stats.events += s->events;
}

static int first_pass_record(struct mt_replay *r, struct mt_instance *in,
                             const struct mt_record *rec)
{
	int ret = note_exec(in, rec);

	if (ret < 0)
		return ret;
	in->records++;
	r->stats.records++;
	if (in->records == 1 || rec->time < in->priv->first_time)
		in->priv->first_time = rec->time;
	if (rec->time > in->end_time)
		in->end_time = rec->time;
	if (mt_record_is_event(rec->type)) {
		in->events++;
		r->stats.events++;
	}
	switch (rec->type) {
	case MT_REC_PROCESS:
		if (in->have_process)
			return 0;
		in->have_process = true;
		in->process_offset = rec->offset;
		in->pid = (uint32_t)rec->u.process.pid;
		in->ppid = (uint32_t)rec->u.process.ppid;
		in->origin = (uint32_t)rec->u.process.origin;
		in->parent_instance = (uint32_t)rec->u.process.parent_instance;
		in->realtime = rec->u.process.realtime;
		in->depth = (uint32_t)rec->u.process.depth;
		in->sampling = rec->u.process.sampling;
		in->start_time = rec->time;
		free(in->exe);
		free(in->cmdline);
		in->exe = dup_bytes(rec->u.process.exe, false);
		in->cmdline = dup_bytes(rec->u.process.cmdline, true);
		return in->exe && in->cmdline ? 0 : -ENOMEM;
	case MT_REC_MODULE:
		return add_module(in, rec);
	case MT_REC_MODULE_GONE:
		for (uint32_t i = 0; i < in->nmodules; i++) {
			if (in->modules[i].base == rec->u.module_gone.base &&
			    !in->modules[i].gone_time) {
				in->modules[i].gone_time = rec->time;
				break;
			}
		}
		return 0;
	case MT_REC_STACK:
		return add_stack(in, rec);
	case MT_REC_PYCODE:
		return mt_pystacks_add_code(&in->priv->py, rec);
	case MT_REC_PYSTACK:
		return mt_pystacks_add_pystack(&in->priv->py, rec);
	case MT_REC_MARK:
		/* a ring's replay starts at the keyframe: the marks before it are not replayed */
		if (!in->priv->kf || rec->time >= in->priv->kf->time)
			in->marks_total++;
		return 0;
	case MT_REC_SAMPLE:
		mt_clock_fit_add(&r->fit, rec->time, rec->u.sample.ns);
		return 0;
	case MT_REC_EXIT:
		if (rec->u.exit.ns)
			mt_clock_fit_add(&r->fit, rec->time, rec->u.exit.ns);
		in->end = MT_END_EXIT;
		in->exit_how = (uint32_t)rec->u.exit.how;
		in->exit_status = (uint32_t)rec->u.exit.status;
		return 0;
	case MT_REC_REACH:
		in->program_end = rec->u.reach.time;
		return 0;
	case MT_REC_LOST:
		if (rec->u.lost.reason == MT_LOST_STACK_TABLE_FULL)
			in->lost_stack_events += rec->u.lost.count;
		else if (rec->u.lost.reason == MT_LOST_DISABLED)
			in->stopped_errno = (int64_t)rec->u.lost.count;
		if (rec->u.lost.reason == MT_LOST_DISABLED && in->end != MT_END_EXIT)
			in->end = MT_END_STOPPED;
		return 0;
	default:
		if (!mt_record_name(rec->type))
			r->stats.unknown_records++;
		return 0;
	}
}

/*
 * After sorting: each instance's forked children, and which instances were
 * replaced by an exec: by a traced program (a later instance of the same
 * pid with origin exec), or by an untraced one (no EXIT, nothing after its
 * last EXEC, no such later instance). Linear in instances, whatever a
 * corrupt file claims.
 */
static int link_instances(struct mt_replay *r)
{
	struct mt_map exec_pids;
	bool created;

	for (uint32_t i = 0; i < r->ninstances; i++) {
		struct mt_instance *c = &r->instances[i];
		const uint32_t *pi;
		struct mt_instance_priv *pp;

		if (c->origin != MT_ORIGIN_FORK ||
		    !(pi = mt_map_get(&r->index, c->parent_instance)) || *pi == i)
			continue;
		pp = r->instances[*pi].priv;
		if (pp->nchildren == pp->children_cap) {
			uint32_t cap = pp->children_cap ? pp->children_cap * 2 : 4;
			void *q = realloc(pp->children, cap * sizeof(*pp->children));
			if (!q)
				return -ENOMEM;
			pp->children = q;
			pp->children_cap = cap;
		}
		pp->children[pp->nchildren++] = i;
	}
	mt_map_init(&exec_pids, 0);
	for (uint32_t i = r->ninstances; i-- > 0;) {
		struct mt_instance *in = &r->instances[i];
		struct mt_instance_priv *p = in->priv;
		if (in->exec_path && p->have_last &&
		    later(p->last_time, p->last_offset, p->exec_time, p->exec_offset)) {
			free(in->exec_path); /* the exec failed: the process went on */
			in->exec_path = NULL;
		}
		if (in->end == MT_END_KILLED && mt_map_get(&exec_pids, in->pid))
			in->end = MT_END_EXEC;
		else if (in->end == MT_END_KILLED && in->exec_path)
			in->end = MT_END_EXEC_UNTRACED;
		if (in->origin == MT_ORIGIN_EXEC && !mt_map_put(&exec_pids, in->pid, &created)) {
			mt_map_free(&exec_pids);
			return -ENOMEM;
		}
		/* no EXIT is no proof of a kill while the program runs, or when the
		 * file lost its end */
		if (in->end == MT_END_KILLED && r->trace->live &&
		    (kill((pid_t)in->pid, 0) == 0 || errno == EPERM))
			in->end = MT_END_RUNNING;
		else if (in->end == MT_END_KILLED && r->trace->cut)
			in->end = MT_END_CUT;
	}
	mt_map_free(&exec_pids);
	return 0;
}

static int cmp_instance(const void *a, const void *b)
{
	const struct mt_instance *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* A definition a ring's consumer copied before it gave the chunk back (keyframes.h). */
static int copied_definition(void *ctx, uint32_t instance, const struct mt_record *rec)
{
	struct mt_replay *r = ctx;
	struct mt_instance *in = get_instance(r, instance);

	return in ? first_pass_record(r, in, rec) : -ENOMEM;
}

int mt_replay_open(struct mt_replay **out, const struct mt_trace *trace, struct mt_error *err)
{
	struct mt_replay *r = calloc(1, sizeof(*r));
	struct mt_record *rec = malloc(sizeof(*rec));
	uint64_t slots = mt_reader_chunk_slots(trace);
	int ret = 0;

	*out = NULL;
	if (!r || !rec) {
		free(r);
		free(rec);
		return -ENOMEM;
	}
	r->trace = trace;
	r->fit = trace->fit;
	r->stats.unused_chunks = trace->unused_chunks;
	mt_map_init(&r->index, sizeof(uint32_t));
	ret = mt_keyframes_read(&r->kf, trace, copied_definition, r, err);
	r->kf_read = true;
	for (uint32_t i = 0; i < r->ninstances; i++)
		r->instances[i].priv->kf = mt_keyframes_of(&r->kf, r->instances[i].id);
	for (uint64_t i = 0; i < slots && ret >= 0; i++) {
		uint64_t slot = mt_reader_slot_by_seq(trace, i);
		struct mt_instance *in;
		struct mt_cursor c;
		bool copied;

		if (r->kf.ring && mt_map_get(&r->kf.copy_chunks, slot))
			continue; /* the consumer's: read by mt_keyframes_read */
		ret = mt_cursor_init(&c, trace, slot, err);
		if (ret <= 0)
			continue;
		copied = mt_keyframes_copied(&r->kf, c.chunk.seq);
		r->stats.chunks++;
		in = get_instance(r, c.chunk.instance);
		if (!in || add_chunk(in, &c.chunk) < 0) {
			ret = -ENOMEM;
			break;
		}
		if (!in->pid)
			in->pid = c.chunk.pid;
		if (trace->slots[slot].skimmed) {
			/* events alone, their times taken by the open's checksum walk */
			first_pass_events(r, in, &trace->slots[slot].skim);
			mt_reader_release(trace, c.chunk.offset, c.chunk.avail);
			continue;
		}
		c.skim_events = true; /* events are replayed in the second pass */
		for (;;) {
			struct mt_skim sk;
			int more = mt_cursor_skim(&c, &sk, rec, err);
			first_pass_events(r, in, &sk);
			if (more <= 0) {
				ret = more;
				break;
			}
			if (copied && mt_key_is_definition(rec->type))
				continue; /* the copy's were read */
			if ((ret = first_pass_record(r, in, rec)) < 0)
				break;
		}
		mt_reader_release(trace, c.chunk.offset, c.chunk.avail); /* until the replay */
	}
	free(rec);
	if (ret == -ENOMEM && err) {
		err->offset = 0;
		snprintf(err->message, sizeof(err->message), "out of memory");
	}
	if (ret < 0) {
		mt_replay_free(r);
		return ret;
	}
	/* instance ids grow with time: sorted, a parent comes before the children it forked */
	if (r->ninstances)
		qsort(r->instances, r->ninstances, sizeof(*r->instances), cmp_instance);
	for (uint32_t i = 0; i < r->ninstances; i++) {
		bool created;
		uint32_t *idx = mt_map_put(&r->index, r->instances[i].id, &created);
		*idx = i; /* no growth: every id is already there */
		/* every STACK is in: the table that found their nodes goes */
		mt_frame_tree_seal(&r->instances[i].priv->frames);
	}
	ret = link_instances(r);
	if (ret < 0) {
		if (err) {
			err->offset = 0;
			snprintf(err->message, sizeof(err->message), "out of memory");
		}
		mt_replay_free(r);
		return ret;
	}
	*out = r;
	return 0;
}

/* ---- accounting ---- */

/* The MARKs among the first c checkpoints. */
static uint32_t marks_at(const struct mt_instance_priv *p, uint32_t c)
{
	return c ? p->cp_marks[c] : 0;
}

/*
 * Positions of the growth series passed by c checkpoints, m of them MARKs,
 * at most the series' n.
 */
static uint32_t series_of(const struct mt_instance *in, uint32_t c, uint32_t m)
{
	uint32_t pos = in->series.marks ? m : c - m;

	/* more MARKs than the first pass counted: a corrupt trace */
	return pos < in->series.n ? pos : in->series.n;
}

static uint32_t series_at(const struct mt_instance *in, uint32_t c)
{
	return series_of(in, c, marks_at(in->priv, c));
}

/* The floors of the windows of positions a .. b-1, where the stack held y bytes. */
static void sync_floors(const struct mt_instance *in, struct stat_growth *g, uint32_t a, uint32_t b,
                        uint64_t y)
{
	const uint64_t n = in->series.n;

	if (a >= b)
		return;
	for (uint64_t w = (uint64_t)a * MT_GROWTH_WINDOWS / n;
	     w <= (uint64_t)(b - 1) * MT_GROWTH_WINDOWS / n; w++)
		if (y < g->floor[w])
			g->floor[w] = y;
	if (b == n)
		g->last = y;
}

/* The growth figures of a stack that held nothing at the first c checkpoints. */
static void growth_zero(const struct mt_instance *in, struct stat_growth *g, uint32_t c)
{
	memset(g, 0, sizeof(*g));
	/* the floors of the windows passed are 0 (nothing was live there), the others to come */
	for (int w = 0; w < MT_GROWTH_WINDOWS; w++)
		g->floor[w] = UINT64_MAX;
	sync_floors(in, g, 0, series_at(in, c), 0);
}

/*
 * Brings a stack's growth figures, which include the first `from` checkpoints, up to
 * now: its live bytes, `live`, held at every checkpoint since.
 */
static void sync_growth(const struct mt_instance *in, struct stat_growth *g, uint32_t from,
                        uint64_t live)
{
	const mt_u128 y = live;
	const uint32_t marks = marks_at(in->priv, from);
	uint64_t a = from, b = in->checkpoints.n;

	if (a == b)
		return; /* neither marks nor the series' positions move but with a checkpoint */
	if (a == 0)
		g->first_bytes = live;
	if (y) {
		g->t_sy += y * (b - a);
		g->t_sxy += y * (in->priv->cp_px[b] - in->priv->cp_px[a]);
		g->t_syy += y * y * (b - a);
	}
	a = marks;
	b = in->nmarks;
	if (y && a != b) {
		/* x is the mark's index: the sum of a .. b-1 */
		g->m_sy += y * (b - a);
		g->m_sxy += y * (((mt_u128)b * (b - 1) - (mt_u128)a * (a ? a - 1 : 0)) / 2);
		g->m_syy += y * y * (b - a);
	}
	sync_floors(in, g, series_of(in, from, marks), series_of(in, in->checkpoints.n, in->nmarks),
	            live);
}

/* A growth checkpoint at `ticks`, a MARK's or not: the live set as it is now. */
static int checkpoint(struct mt_instance *in, uint64_t ticks, bool mark)
{
	struct mt_instance_priv *p = in->priv;
	struct mt_checkpoints *c = &in->checkpoints;
	uint64_t ns = mt_clock_ns(p->fit, ticks), x;

	if (c->n + 2 > p->cp_cap) {
		uint32_t cap = p->cp_cap ? p->cp_cap * 2 : 64;
		void *q = realloc(p->cp_px, cap * sizeof(*p->cp_px));
		if (!q)
			return -ENOMEM;
		p->cp_px = q;
		if (!(q = realloc(p->cp_marks, cap * sizeof(*p->cp_marks))))
			return -ENOMEM;
		p->cp_marks = q;
		p->cp_cap = cap;
	}
	if (c->n == 0) {
		c->first_ns = ns;
		p->cp_px[0] = 0;
		p->cp_marks[0] = 0;
	}
	x = ns > c->first_ns ? ns - c->first_ns : 0;
	if (x < c->last_x)
		x = c->last_x; /* the clock fit is monotonic; this only guards rounding */
	p->cp_px[c->n + 1] = p->cp_px[c->n] + x;
	p->cp_marks[c->n + 1] = p->cp_marks[c->n] + mark;
	c->sx += x;
	c->sxx += (mt_u128)x * x;
	c->last_x = x;
	c->n++;
	return 0;
}

static uint64_t even_tick(const struct mt_instance_priv *p, uint32_t i)
{
	return p->even_start +
	       (uint64_t)((mt_u128)(p->even_end - p->even_start) * i / (MT_EVEN_CHECKPOINTS - 1));
}

/* The evenly spaced checkpoints due before `key`, each taken before the events after it. */
static int even_checkpoints(struct mt_instance *in, uint64_t key, bool all)
{
	struct mt_instance_priv *p = in->priv;
	int ret;

	while (p->next_even < MT_EVEN_CHECKPOINTS && (all || p->next_even_tick < key)) {
		if ((ret = checkpoint(in, p->next_even_tick, false)) < 0)
			return ret;
		p->next_even++;
		p->next_even_tick = p->next_even < MT_EVEN_CHECKPOINTS ? even_tick(p, p->next_even)
		                                                       : UINT64_MAX;
	}
	return 0;
}

static int pages_catch_up(struct live *l);

/* The last sample's traced_until_next takes the most live since it (traced_most). */
static void traced_fold(struct mt_instance *in)
{
	struct mt_instance_priv *p = in->priv;

	if (in->nsamples && in->samples[in->nsamples - 1].traced_until_next < p->traced_most)
		in->samples[in->nsamples - 1].traced_until_next = p->traced_most;
	p->traced_most = 0;
}

static int add_sample(struct mt_instance *in, const struct mt_record *rec)
{
	struct mt_instance_priv *p = in->priv;
	struct mt_sample_point *sp;
	int ret;

	if (!in->sampling && p->live && (ret = pages_catch_up(p->live)) < 0)
		return ret;
	traced_fold(in);
	if (in->nsamples == p->samples_cap) {
		uint64_t cap =
		        p->samples_cap ? p->samples_cap * 2 : 8; /* many processes live for a few */
		void *q = realloc(in->samples, cap * sizeof(*in->samples));
		if (!q)
			return -ENOMEM;
		in->samples = q;
		p->samples_cap = cap;
	}
	sp = &in->samples[in->nsamples++];
	sp->time = rec->time;
	sp->live_host = in->kind[MT_KIND_HOST].live_bytes;
	sp->live_host_blocks = in->kind[MT_KIND_HOST].live_blocks;
	sp->live_mmap = in->kind[MT_KIND_MMAP].live_bytes;
	/* sampled: the live bytes' estimate stands for the pages they touch */
	sp->host_pages = in->sampling ? sp->live_host
	                 : p->live    ? mt_heap_pages_bytes(&p->live->pages)
	                              : 0;
	/* the bytes before the last change too: a free RSS may still have held */
	sp->traced_max = sp->live_host + sp->live_mmap > p->traced_before_last
	                         ? sp->live_host + sp->live_mmap
	                         : p->traced_before_last;
	sp->traced_until_next = sp->traced_max;
	p->sample_waits = true;
	memcpy(sp->values, rec->u.sample.values, sizeof(sp->values));
	return 0;
}

static int add_mark(struct mt_instance *in, const struct mt_record *rec)
{
	struct mt_instance_priv *p = in->priv;
	struct mt_mark_point *m;
	int ret;

	if (in->nmarks == p->marks_cap) {
		uint32_t cap = p->marks_cap ? p->marks_cap * 2 : 64;
		void *q = realloc(in->marks, cap * sizeof(*in->marks));
		if (!q)
			return -ENOMEM;
		in->marks = q;
		p->marks_cap = cap;
	}
	m = &in->marks[in->nmarks];
	m->time = rec->time;
	m->ns = mt_clock_ns(p->fit, rec->time);
	m->label = dup_bytes(rec->u.mark.label, false);
	if (!m->label)
		return -ENOMEM;
	for (int k = 0; k < MT_KIND_COUNT; k++)
		m->live[k] = in->kind[k].live_bytes;
	/* the mark is a checkpoint of both series: its time, and its index */
	if ((ret = checkpoint(in, rec->time, true)) < 0) {
		free(m->label);
		return ret;
	}
	in->nmarks++;
	return 0;
}

/* Room for one more (stack, kind): the hot array stays aligned to its cache lines. */
static int stats_grow(struct mt_instance_priv *p)
{
	uint32_t cap = p->stats_cap ? p->stats_cap * 2 : 64;
	struct stat_hot *hot;
	void *q;

	if (cap <= p->stats_cap || cap > HOST_YOUNG)
		return -ENOMEM;
	/* each array is the larger one as soon as it is: stats_cap moves once all are */
	if (!(q = realloc(p->ids, (size_t)cap * sizeof(*p->ids))))
		return -ENOMEM;
	p->ids = q;
	if (!p->lean) {
		if (!(q = realloc(p->synced, (size_t)cap * sizeof(*p->synced))))
			return -ENOMEM;
		p->synced = q;
	}
	if (!(hot = aligned_alloc(64, (size_t)cap * sizeof(*hot))))
		return -ENOMEM;
	if (p->nstats)
		memcpy(hot, p->hot, (size_t)p->nstats * sizeof(*hot));
	free(p->hot);
	p->hot = hot;
	p->stats_cap = cap;
	return 0;
}

/*
 * An instance's per-stack figures are read during its replay and its
 * instance_done callback, and its forked children's seeds name them until
 * each child is seeded: after that they go, so that a trace of many
 * processes costs what each holds live, not every figure it ever had.
 */
static void stats_release(struct mt_instance_priv *p)
{
	if (!p->stats_done || p->seeds_out)
		return;
	for (int k = 0; k < MT_KIND_COUNT; k++)
		mt_map_free(&p->stat_index[k]);
	free(p->hot);
	free(p->ids);
	free(p->synced);
	free(p->growth);
	p->hot = NULL;
	p->ids = NULL;
	p->synced = NULL;
	p->growth = NULL;
	p->nstats = p->stats_cap = 0;
	p->ngrowth = p->growth_cap = 0;
}

/* stat_of when the instance's own stack has no figures yet, or another instance's. */
static int stat_find(struct mt_instance *in, enum mt_kind kind, uint32_t si, uint32_t stack,
                     uint32_t *out)
{
	struct mt_instance_priv *p = in->priv;
	uint64_t key = (uint64_t)si << 32 | stack, *own = NULL;
	uint32_t *idx, i;
	bool created;

	if (si == in->id) {
		if (!(own = mt_by_stack_at(&p->own_stat[kind], stack)))
			return -ENOMEM;
		if (*own) {
			*out = (uint32_t)(*own - 1);
			return 0;
		}
	}
	/* a lean replay's own stacks are found by id only: its stat_index holds the others */
	if (p->lean && own) {
		idx = NULL;
	} else {
		idx = mt_map_put_small(&p->stat_index[kind], key, &created,
		                       MT_MAP_SHIFT(sizeof(*idx)), MT_MAP_VOFF(sizeof(*idx)),
		                       sizeof(*idx));
		if (!idx)
			return -ENOMEM;
		if (!created) {
			if (own)
				*own = (uint64_t)*idx + 1;
			*out = *idx;
			return 0;
		}
	}
	if (p->nstats == p->stats_cap && stats_grow(p) < 0) {
		if (idx)
			mt_map_del(&p->stat_index[kind], key);
		return -ENOMEM;
	}
	i = p->nstats++;
	if (idx)
		*idx = i;
	if (own)
		*own = (uint64_t)i + 1;
	p->hot[i] = (struct stat_hot){.epoch = p->epoch[kind], .kind = kind};
	p->ids[i] = (struct stat_id){stack, si};
	*out = i;
	/* nothing was live before: its growth figures are zero up to now (growth_zero) */
	if (!p->lean)
		p->synced[i] = (struct stat_sync){in->checkpoints.n, 0};
	return 0;
}

/*
 * The index of (stack_instance si, stack, kind)'s figures, made the first
 * time it is met: an event's own stack met before is found inline, the
 * rest out of line.
 */
static inline int stat_of(struct mt_instance *in, enum mt_kind kind, uint32_t si, uint32_t stack,
                          uint32_t *out)
{
	const struct mt_by_stack *own = &in->priv->own_stat[kind];

	if (si == in->id && stack < own->cap && own->dense[stack]) {
		*out = (uint32_t)(own->dense[stack] - 1);
		return 0;
	}
	return stat_find(in, kind, si, stack, out);
}

/* Room for one more growth record. */
static int growth_grow(struct mt_instance_priv *p)
{
	uint32_t cap = p->growth_cap ? p->growth_cap * 2 : 64;
	void *q;

	if (cap <= p->growth_cap || !(q = realloc(p->growth, (size_t)cap * sizeof(*p->growth))))
		return -ENOMEM;
	p->growth = q;
	p->growth_cap = cap;
	return 0;
}

/*
 * Brings stat i's growth figures up to now: its live bytes, `live`, held at
 * every checkpoint since its last sync. Its record is made the first time
 * they are not zero; where it cannot be, growth_failed fails the replay.
 */
static void stat_sync(struct mt_instance *in, uint32_t i, uint64_t live)
{
	struct mt_instance_priv *p = in->priv;
	struct stat_sync *y = &p->synced[i];

	if (y->checkpoints == in->checkpoints.n)
		return;
	if (!y->growth && live) {
		if (p->ngrowth == p->growth_cap && growth_grow(p) < 0) {
			p->growth_failed = true;
			return;
		}
		growth_zero(in, &p->growth[p->ngrowth], y->checkpoints);
		y->growth = ++p->ngrowth;
	}
	if (y->growth)
		sync_growth(in, &p->growth[y->growth - 1], y->checkpoints, live);
	y->checkpoints = in->checkpoints.n;
}

/*
 * A change of the figures of stat i (stat_of). A checkpoint or mark bumps
 * checkpoints.n and moves every position the growth figures follow, so one
 * comparison says whether its growth figures are behind (none before the
 * first checkpoint, when every synced is 0). A lean replay takes no checkpoint (it
 * applies events only): its checkpoints.n stays 0, and it has no synced.
 * Inline: its call cost a tenth of an event's instructions. freed: the change
 * takes a block away (a constant where inlined).
 */
static inline __attribute__((always_inline)) void adjust_by(struct mt_instance *in, uint32_t i,
                                                            int64_t dbytes, int64_t dblocks,
                                                            uint64_t allocs, uint64_t alloc_bytes,
                                                            bool freed)
{
	struct mt_instance_priv *p = in->priv;
	struct stat_hot *s = &p->hot[i];
	enum mt_kind kind = (enum mt_kind)s->kind;
	struct mt_kind_stats *k = &in->kind[kind];

	if (in->checkpoints.n && p->synced[i].checkpoints != in->checkpoints.n)
		stat_sync(in, i, s->live_bytes);
	if (s->epoch != p->epoch[kind]) {
		s->peak_bytes = s->live_bytes;
		s->peak_blocks = s->live_blocks;
		s->epoch = p->epoch[kind];
	}
	s->live_bytes += (uint64_t)dbytes;
	s->live_blocks += (uint64_t)dblocks;
	k->live_bytes += (uint64_t)dbytes;
	k->live_blocks += (uint64_t)dblocks;
	s->allocations += allocs;
	k->allocations += allocs;
	s->bytes_allocated += alloc_bytes;
	k->bytes_allocated += alloc_bytes;
	/* a block freed makes no peak: every rise was compared */
	if (!freed && k->live_bytes > k->peak_bytes) {
		k->peak_bytes = k->live_bytes;
		k->peak_blocks = k->live_blocks;
		k->peak_time = p->now;
		p->epoch[kind]++;
	}
	/* what a SAMPLE keeps of the moments around it: a lean replay applies none */
	if ((kind == MT_KIND_HOST || kind == MT_KIND_MMAP) && !p->lean) {
		uint64_t traced =
		        in->kind[MT_KIND_HOST].live_bytes + in->kind[MT_KIND_MMAP].live_bytes;
		p->traced_before_last = traced - (uint64_t)dbytes;
		/*
		 * The first change after a sample: an allocation RSS may already have held. A
		 * block freed leaves less than the sample's traced_max, or than a change since
		 * the sample (traced_fold takes the most of both): neither is compared.
		 */
		if (!freed && p->sample_waits && in->samples[in->nsamples - 1].traced_max < traced)
			in->samples[in->nsamples - 1].traced_max = traced;
		p->sample_waits = false;
		if (!freed && p->traced_most < traced)
			p->traced_most = traced;
	}
}

static inline __attribute__((always_inline)) void adjust_at(struct mt_instance *in, uint32_t i,
                                                            int64_t dbytes, int64_t dblocks,
                                                            uint64_t allocs, uint64_t alloc_bytes)
{
	adjust_by(in, i, dbytes, dblocks, allocs, alloc_bytes, false);
}

static int adjust(struct mt_instance *in, enum mt_kind kind, uint32_t si, uint32_t stack,
                  int64_t dbytes, int64_t dblocks, uint64_t allocs, uint64_t alloc_bytes)
{
	uint32_t i;
	int ret = stat_of(in, kind, si, stack, &i);

	if (ret < 0)
		return ret;
	adjust_at(in, i, dbytes, dblocks, allocs, alloc_bytes);
	return 0;
}

/*
 * Stat i's figures as callers see them, in *s: the hot ones, and the growth
 * figures of its record, or those of a stack that held nothing at the
 * checkpoints it synced. A lean replay has none: growth zero.
 */
static const struct mt_stack_stats *stat_view(const struct mt_instance *in, uint32_t i,
                                              struct mt_stack_stats *s)
{
	const struct mt_instance_priv *p = in->priv;
	const struct stat_hot *h = &p->hot[i];

	memset(s, 0, sizeof(*s));
	s->stack = p->ids[i].stack;
	s->stack_instance = p->ids[i].stack_instance;
	s->kind = (enum mt_kind)h->kind;
	s->live_bytes = h->live_bytes;
	s->live_blocks = h->live_blocks;
	s->allocations = h->allocations;
	s->bytes_allocated = h->bytes_allocated;
	s->peak_bytes = h->peak_bytes;
	s->peak_blocks = h->peak_blocks;
	s->epoch = h->epoch;
	if (!p->lean) {
		const struct stat_sync *y = &p->synced[i];
		struct stat_growth zero;
		const struct stat_growth *g = &zero;
		if (y->growth)
			g = &p->growth[y->growth - 1];
		else
			growth_zero(in, &zero, y->checkpoints);
		s->first_bytes = g->first_bytes;
		s->t_sy = g->t_sy;
		s->t_sxy = g->t_sxy;
		s->t_syy = g->t_syy;
		s->m_sy = g->m_sy;
		s->m_sxy = g->m_sxy;
		s->m_syy = g->m_syy;
		memcpy(s->floor, g->floor, sizeof(s->floor));
		s->last = g->last;
		s->t_synced = y->checkpoints;
		s->m_synced = marks_at(p, y->checkpoints);
		s->g_synced = series_at(in, y->checkpoints);
	}
	return s;
}

static void finish_stack_stats(struct mt_instance *in)
{
	struct mt_instance_priv *p = in->priv;

	for (uint32_t i = 0; i < p->nstats; i++) {
		struct stat_hot *s = &p->hot[i];
		if (!p->lean)
			stat_sync(in, i, s->live_bytes);
		if (s->epoch != p->epoch[s->kind]) {
			s->peak_bytes = s->live_bytes;
			s->peak_blocks = s->live_blocks;
			s->epoch = p->epoch[s->kind];
		}
	}
}

/* ---- live set ---- */

static void live_free(struct live *l);

/* The live blocks a replay's live set has room for from the start: 256 slots, 4 KiB. */
#define LIVE_ROOMY 191u

static struct live *live_new(struct mt_instance_priv *owner)
{
	struct live *l = calloc(1, sizeof(*l));

	if (l) {
		/* the ring's consumer keeps its live sets while the program runs: memory a
		 * block counts more there than a longer probe */
		(owner->lean ? mt_map_init_dense : mt_map_init)(&l->host,
		                                                sizeof(struct host_block));
		mt_map_init(&l->big, sizeof(struct big_block));
		mt_heap_pages_init(&l->pages);
		l->owner = owner;
		/* a replay's small live set a quarter full at most: each event's probe run,
		 * and a free's shift, about one slot shorter than at 3/4 */
		if (!owner->lean && mt_map_reserve(&l->host, LIVE_ROOMY) < 0) {
			live_free(l);
			return NULL;
		}
	}
	return l;
}

static void live_free(struct live *l)
{
	if (!l)
		return;
	mt_map_free(&l->host);
	mt_map_free(&l->big);
	mt_heap_pages_free(&l->pages);
	free(l->young);
	free(l->ranges);
	free(l);
}

/* A copy for a forked child: its young blocks counted first, so that the copy has none. */
static struct live *live_copy(struct live *src)
{
	struct live *l;

	if (pages_catch_up(src) < 0 || !(l = calloc(1, sizeof(*l))))
		return NULL;
	l->owner = src->owner;
	l->owner->seeds_out++; /* until seed_child or seed_drop */
	mt_map_init(&l->big, sizeof(struct big_block));
	if (mt_map_copy(&l->host, &src->host) < 0 || mt_map_copy(&l->big, &src->big) < 0 ||
	    mt_heap_pages_copy(&l->pages, &src->pages) < 0)
		goto fail;
	if (src->nranges) {
		l->ranges = malloc(src->nranges * sizeof(*l->ranges));
		if (!l->ranges)
			goto fail;
		memcpy(l->ranges, src->ranges, src->nranges * sizeof(*l->ranges));
		l->nranges = l->cap = src->nranges;
	}
	return l;
fail:
	mt_map_free(&l->host);
	mt_map_free(&l->big);
	mt_heap_pages_free(&l->pages);
	free(l);
	return NULL;
}

/* A child's seed it will not take: its owner's figures may go. */
static void seed_drop(struct live *seed)
{
	if (!seed)
		return;
	seed->owner->seeds_out--;
	stats_release(seed->owner);
	live_free(seed);
}

static uint64_t range_end(uint64_t a, uint64_t len)
{
	return a + len < a ? UINT64_MAX : a + len;
}

static int range_insert(struct live *l, size_t at, struct range r)
{
	if (l->nranges == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		void *q = realloc(l->ranges, cap * sizeof(*l->ranges));
		if (!q)
			return -ENOMEM;
		l->ranges = q;
		l->cap = cap;
	}
	memmove(l->ranges + at + 1, l->ranges + at, (l->nranges - at) * sizeof(*l->ranges));
	l->ranges[at] = r;
	l->nranges++;
	return 0;
}

/* First range index whose end is past a. */
static size_t range_find(const struct live *l, uint64_t a)
{
	size_t lo = 0, hi = l->nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (range_end(l->ranges[mid].addr, l->ranges[mid].len) <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Takes [a, a + len) out of the tracked ranges: trims, splits, removes. */
static int ranges_remove(struct mt_instance *in, struct live *l, uint64_t a, uint64_t len,
                         uint64_t *removed)
{
	uint64_t b = range_end(a, len);
	size_t i = range_find(l, a);
	int ret;

	*removed = 0;
	while (i < l->nranges && l->ranges[i].addr < b) {
		struct range *r = &l->ranges[i];
		uint64_t s = r->addr, e = range_end(r->addr, r->len);

		if (a <= s && b >= e) {
			ret = adjust(in, MT_KIND_MMAP, r->stack_instance, r->stack,
			             -(int64_t)(e - s), -1, false, 0);
			*removed += e - s;
			memmove(r, r + 1, (l->nranges - i - 1) * sizeof(*r));
			l->nranges--;
		} else if (a <= s) {
			ret = adjust(in, MT_KIND_MMAP, r->stack_instance, r->stack,
			             -(int64_t)(b - s), 0, false, 0);
			*removed += b - s;
			r->addr = b;
			r->len = e - b;
			i++;
		} else if (b >= e) {
			ret = adjust(in, MT_KIND_MMAP, r->stack_instance, r->stack,
			             -(int64_t)(e - a), 0, false, 0);
			*removed += e - a;
			r->len = a - s;
			i++;
		} else {
			struct range tail = {b, e - b, r->stack, r->stack_instance};
			ret = adjust(in, MT_KIND_MMAP, r->stack_instance, r->stack,
			             -(int64_t)(b - a), 1, false, 0);
			*removed += b - a;
			r->len = a - s;
			if (ret == 0)
				ret = range_insert(l, i + 1, tail);
			i += 2;
		}
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int ranges_add(struct mt_instance *in, struct live *l, uint64_t a, uint64_t len,
                      uint32_t stack, uint32_t si, bool alloc, uint64_t alloc_bytes)
{
	struct range r = {a, range_end(a, len) - a, stack, si};
	uint64_t removed;
	int ret;

	if (r.len == 0)
		return 0;
	/* a mapping placed over tracked ones (MAP_FIXED) replaces what it covers */
	ret = ranges_remove(in, l, a, r.len, &removed);
	if (ret < 0)
		return ret;
	ret = range_insert(l, range_find(l, a), r);
	if (ret < 0)
		return ret;
	return adjust(in, MT_KIND_MMAP, si, stack, (int64_t)r.len, 1, alloc, alloc_bytes);
}

static uint64_t page_round(uint64_t len)
{
	uint64_t r = (len + PAGE_ROUND - 1) & ~(uint64_t)(PAGE_ROUND - 1);

	return r < len ? len : r;
}

const char *mt_end_name(enum mt_end end)
{
	switch (end) {
	case MT_END_EXIT:
		return "exit";
	case MT_END_EXEC:
		return "exec";
	case MT_END_STOPPED:
		return "stopped";
	case MT_END_EXEC_UNTRACED:
		return "exec-untraced";
	case MT_END_RUNNING:
		return "running";
	case MT_END_CUT:
		return "cut";
	default:
		return "killed";
	}
}

/* Whether the pages live host blocks touch are kept: not sampled (nor the ring's consumer). */
static bool keeps_pages(const struct mt_instance *in)
{
	return !in->sampling && !in->priv->lean;
}

/* The bytes a live block of `kind` stands for: its size, or in a sampled instance its expected
 * weight. */
static uint64_t block_bytes(const struct mt_instance *in, const struct block_val *b,
                            enum mt_kind kind)
{
	return in->sampling && kind == MT_KIND_HOST
	               ? mt_sampling_weight(in->sampling, b->size, 0).bytes
	               : b->size;
}

/* The figures of the block at key, whose value in the live set's map is h. */
static struct block_val block_get(const struct live *l, uint64_t key, const struct host_block *h)
{
	const struct big_block *big;
	uint32_t stat = h->stat & ~HOST_YOUNG;

	if (h->size != HOST_BIG || !(big = mt_map_get(&l->big, key)))
		return (struct block_val){h->size, stat, 1};
	return (struct block_val){big->size, stat, (uint32_t)big->blocks};
}

/* Sets the block at key, whose value in the live set's map is h (made or found), to b. */
static int block_set(struct live *l, uint64_t key, struct host_block *h, const struct block_val *b)
{
	struct big_block *big;
	bool created;

	h->stat = b->stat;
	if (b->size < HOST_BIG && b->blocks == 1) {
		h->size = (uint32_t)b->size;
		return 0;
	}
	if (!(big = mt_map_put(&l->big, key, &created)))
		return -ENOMEM;
	*big = (struct big_block){b->size, b->blocks};
	h->size = HOST_BIG;
	return 0;
}

/* A found block's value is about to be set again: the old one's big part goes. */
static void block_reset(struct live *l, uint64_t key, const struct host_block *h)
{
	if (h->size == HOST_BIG)
		mt_map_del(&l->big, key);
}

/*
 * The cache lines a unit will touch are fetched ahead of it, in two steps:
 * FAR ahead those its own fields lead to (its block's slot in the live set,
 * its stack's entry), NEAR ahead those the first ones lead to (the stack's
 * figures, found through its block or its entry, and the page counts of a
 * block whose pages are counted). A few cache misses' worth of the replay's
 * work, and less than the feed keeps made ahead.
 */
#define PREFETCH_FAR  16
#define PREFETCH_NEAR 6
/* Live set slots and (stack, kind) figures that fill a 512 KiB cache, from which on it pays. */
#define PREFETCH_BLOCKS ((512u << 10) >> HOST_SHIFT)
#define PREFETCH_STATS  ((512u << 10) / sizeof(struct stat_hot))

/*
 * Counts the pages of the young blocks still live (struct live's young).
 * The young are in no order a cache likes: each one's slot is fetched
 * PREFETCH_FAR entries ahead.
 */
static int pages_catch_up(struct live *l)
{
	uint32_t n = l->nyoung;
	int ret;

	l->nyoung = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t key = l->young[i];
		struct host_block *h;

		if (l->host.cap >= PREFETCH_BLOCKS && i + PREFETCH_FAR < n)
			mt_map_prefetch(&l->host, l->young[i + PREFETCH_FAR], false);
		h = mt_map_get_small(&l->host, key, HOST_SHIFT, HOST_VOFF);
		if (!h || !(h->stat & HOST_YOUNG))
			continue;
		h->stat &= ~HOST_YOUNG;
		if ((ret = mt_heap_pages_add(&l->pages, key, block_get(l, key, h).size)) < 0)
			return ret;
	}
	return 0;
}

/* Fewest young blocks caught up at once: a small live set's are caught up this often. */
#define YOUNG_MIN 4096u

/* Room for one more young block: caught up, or more room. */
static __attribute__((noinline)) int young_room(struct live *l)
{
	uint32_t cap;
	void *q;

	if (l->nyoung >= YOUNG_MIN && l->nyoung >= l->host.count)
		return pages_catch_up(l);
	cap = l->young_cap ? l->young_cap * 2 : YOUNG_MIN;
	q = cap > l->young_cap ? realloc(l->young, cap * sizeof(*l->young)) : NULL;
	if (!q)
		return -ENOMEM;
	l->young = q;
	l->young_cap = cap;
	return 0;
}

/* The block at key, just made, is young: its pages wait (struct live's young). */
static inline __attribute__((always_inline)) int young_add(struct live *l, uint64_t key,
                                                           struct host_block *h)
{
	int ret;

	if (l->nyoung == l->young_cap && (ret = young_room(l)) < 0)
		return ret;
	l->young[l->nyoung++] = key;
	h->stat |= HOST_YOUNG;
	return 0;
}

/*
 * Takes the block at addr out of the live set, if there: its kind, size and
 * blocks go into *out, kept in registers by the caller it is inlined into.
 */
static inline __attribute__((always_inline)) bool host_remove(struct mt_instance *in,
                                                              struct live *l, uint64_t addr,
                                                              struct block_val *out,
                                                              enum mt_kind *out_kind)
{
	struct host_block h;
	struct big_block big;
	enum mt_kind kind;
	bool young;

	if (!mt_map_take_small(&l->host, addr, &h, HOST_SHIFT, HOST_VOFF, sizeof(h)))
		return false;
	young = h.stat & HOST_YOUNG;
	h.stat &= ~HOST_YOUNG;
	*out = (struct block_val){h.size, h.stat, 1};
	if (h.size == HOST_BIG && mt_map_take(&l->big, addr, &big))
		*out = (struct block_val){big.size, h.stat, (uint32_t)big.blocks};
	kind = (enum mt_kind)in->priv->hot[out->stat].kind;
	*out_kind = kind;
	if (!young && kind == MT_KIND_HOST && keeps_pages(in))
		mt_heap_pages_remove(&l->pages, addr, out->size);
	/* the youngest block freed: its entry goes (one freed at once costs nothing more) */
	if (young && l->young[l->nyoung - 1] == addr)
		l->nyoung--;
	adjust_by(in, out->stat, -(int64_t)block_bytes(in, out, kind), -(int64_t)out->blocks, 0, 0,
	          true);
	return true;
}

/* host_add of a block that stands for w (a constant where it stands for itself). */
static inline __attribute__((always_inline)) int host_put(struct mt_instance *in, struct live *l,
                                                          uint64_t addr, uint64_t size,
                                                          uint64_t stack, enum mt_kind kind,
                                                          struct mt_weight w)
{
	struct host_block *b;
	struct block_val v;
	uint32_t stat;
	bool created;
	int ret;

	b = mt_map_put_small(&l->host, addr, &created, HOST_SHIFT, HOST_VOFF, sizeof(*b));
	if (!b)
		return -ENOMEM;
	if (!created) {
		/* an address handed out twice means its free was lost: the old block is gone */
		struct block_val was = block_get(l, addr, b);
		enum mt_kind old = (enum mt_kind)in->priv->hot[was.stat].kind;
		block_reset(l, addr, b);
		if (old == MT_KIND_HOST && keeps_pages(in) && !(b->stat & HOST_YOUNG))
			mt_heap_pages_remove(&l->pages, addr, was.size);
		adjust_at(in, was.stat, -(int64_t)block_bytes(in, &was, old), -(int64_t)was.blocks,
		          0, 0);
	}
	if ((ret = stat_of(in, kind, in->id, (uint32_t)stack, &stat)) < 0)
		return ret;
	v = (struct block_val){size, stat, w.blocks};
	if ((ret = block_set(l, addr, b, &v)) < 0)
		return ret;
	if (kind == MT_KIND_HOST && keeps_pages(in) && (ret = young_add(l, addr, b)) < 0)
		return ret;
	adjust_at(in, stat, (int64_t)w.bytes, w.blocks, w.blocks, w.bytes);
	return 0;
}

static int host_add(struct mt_instance *in, struct live *l, uint64_t addr, uint64_t size,
                    uint64_t stack, enum mt_kind kind)
{
	/* sampled mode: a host block stands for its expected weight; the pages it
	 * touches say nothing of the unrecorded blocks' (add_sample) */
	if (in->sampling && kind == MT_KIND_HOST)
		return host_put(in, l, addr, size, stack, kind,
		                mt_sampling_weight(in->sampling, size, addr ^ in->priv->now));
	return host_put(in, l, addr, size, stack, kind, (struct mt_weight){size, 1});
}

/* ---- second pass ---- */

/*
 * The records are decoded on another core when one is free, for an
 * instance with this many events: a thread's start costs more than a
 * short process's decoding.
 */
#define FEED_THREAD_EVENTS (1u << 16)

void mt_replay_set_thread(struct mt_replay *r, enum mt_replay_thread how)
{
	r->thread = how;
}

static enum mt_feed_thread feed_thread(const struct mt_replay *r, const struct mt_instance *in)
{
	switch (r->thread) {
	case MT_REPLAY_THREAD_ALWAYS:
		return MT_FEED_THREAD;
	case MT_REPLAY_THREAD_NEVER:
		return MT_FEED_INLINE;
	case MT_REPLAY_THREAD_GIVEN_BACK:
		return MT_FEED_GIVEN_BACK;
	default:
		break;
	}
	/*
	 * Whether a core is free is not known ahead (the load average's minute
	 * stays high for a while after the traced program ran, and what is
	 * runnable at one moment says little of the next): the feed gives its
	 * thread back if the replay waits for it.
	 */
	if (in->events < FEED_THREAD_EVENTS || sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return MT_FEED_INLINE;
	return MT_FEED_WHILE_FREE;
}
/* The key of the block a unit looks up, or 0 for none. */
static inline __attribute__((always_inline)) uint64_t unit_block(const struct mt_unit *u)
{
	if (u->flags & MT_UNIT_WHOLE)
		return 0;
	switch (u->ev.type) {
	case MT_REC_ALLOC:
	case MT_REC_FREE:
		return mt_block_key(u->ev.fn, u->ev.addr);
	case MT_REC_REALLOC:
		return u->flags & MT_UNIT_FIRST_HALF ? u->ev.old : u->ev.addr;
	default:
		return 0;
	}
}

/* The unit allocates: its stack's entry among the instance's own. */
static inline __attribute__((always_inline)) const uint64_t *
unit_own_stat(const struct mt_instance_priv *p, const struct mt_unit *u)
{
	const struct mt_by_stack *own;

	if ((u->flags & MT_UNIT_WHOLE) ||
	    (u->ev.type != MT_REC_ALLOC && u->ev.type != MT_REC_REALLOC) ||
	    (u->flags & MT_UNIT_FIRST_HALF))
		return NULL;
	own = &p->own_stat[u->ev.type == MT_REC_ALLOC ? u->ev.kind : MT_KIND_HOST];
	return u->ev.stack < own->cap ? &own->dense[u->ev.stack] : NULL;
}

static inline __attribute__((always_inline)) void prefetch_far(const struct mt_instance_priv *p,
                                                               const struct mt_unit *u)
{
	const uint64_t *own = unit_own_stat(p, u);
	uint64_t key = unit_block(u);

	if (!key)
		return;
	mt_map_prefetch(&p->live->host, key, true);
	if (own)
		__builtin_prefetch(own);
}

/*
 * Stat i's figures, and where its event will bring its growth figures up to
 * date (the first change after a checkpoint), the lines of them that it
 * writes: the sums and the floors.
 */
static inline __attribute__((always_inline)) void prefetch_stat(const struct mt_instance *in,
                                                                uint32_t i)
{
	const struct mt_instance_priv *p = in->priv;

	__builtin_prefetch(&p->hot[i]);
	if (p->synced && p->synced[i].checkpoints != in->checkpoints.n && p->synced[i].growth) {
		const char *g = (const char *)&p->growth[p->synced[i].growth - 1];
		__builtin_prefetch(g);
		__builtin_prefetch(g + 64);
		__builtin_prefetch(g + 128);
		__builtin_prefetch(g + sizeof(struct stat_growth) - 1);
	}
}

static inline __attribute__((always_inline)) void prefetch_near(const struct mt_instance *in,
                                                                const struct mt_unit *u)
{
	const struct mt_instance_priv *p = in->priv;
	const uint64_t *own = unit_own_stat(p, u);
	const struct host_block *b;
	uint64_t key;

	if (own) {
		if (*own)
			prefetch_stat(in, (uint32_t)(*own - 1));
		return;
	}
	key = unit_block(u);
	if (key && (b = mt_map_get_small(&p->live->host, key, HOST_SHIFT, HOST_VOFF))) {
		prefetch_stat(in, b->stat & ~HOST_YOUNG);
		/* a young block's pages are not counted: its free leaves them */
		if (!(b->stat & HOST_YOUNG))
			mt_heap_pages_prefetch(&p->live->pages, key, b->size);
	}
}

static int event_alloc(struct mt_instance *in, struct live *l, uint64_t fn, uint64_t addr,
                       uint64_t size, uint64_t stack, enum mt_kind kind)
{
	if (addr == 0) {
		in->kind[kind].allocations++;
		return 0;
	}
	return host_add(in, l, mt_block_key(fn, addr), size, stack, kind);
}

static int event_free(struct mt_instance *in, struct live *l, uint64_t fn, uint64_t addr,
                      enum mt_kind kind)
{
	struct block_val b;
	enum mt_kind found;

	if (addr == 0)
		return 0;
	if (host_remove(in, l, mt_block_key(fn, addr), &b, &found)) {
		in->last_free_size = b.size;
		in->kind[found].frees += b.blocks;
	} else {
		in->last_free_size = 0;
		in->kind[kind].unknown_frees++;
	}
	return 0;
}

/* A realloc: its old block given back (first_half), or its new one taken. */
static int event_realloc(struct mt_instance *in, struct live *l, bool first_half, uint64_t old,
                         uint64_t addr, uint64_t size, uint64_t stack)
{
	struct block_val b;
	enum mt_kind found;

	if (first_half) {
		if (host_remove(in, l, old, &b, &found))
			in->kind[MT_KIND_HOST].frees += b.blocks;
		else
			in->kind[MT_KIND_HOST].unknown_frees++;
		return 0;
	}
	return addr != 0 ? host_add(in, l, addr, size, stack, MT_KIND_HOST) : 0;
}

/*
 * An ALLOC (a) and the FREE of its block that is the instance's very next
 * event half (f), counted together where the two one by one would leave
 * the same state (both replays' pairs: apply_pair, and the ring's
 * consumer's mt_replay_stream_apply_pair): 1, or 0 when they must go one
 * by one (nothing changed). Most blocks of many programs go like this, and
 * of the state the two change only what this changes the same: the
 * stack's allocations and bytes allocated (its entry made if new, *stat;
 * its live figures back where they were), the kind's allocations, bytes
 * allocated and frees, and last_free_size. The live set's map is as
 * before: the block's slot would be the first empty one of its probe run,
 * and taking it would shift nothing back. What the pair must not change
 * goes the slow way: a new peak of the kind (its time and every stack's
 * figures at it), a block already at the address (its lost free), a
 * sampled block (its weight is drawn at random), a live set about to grow
 * (the slots' order, which walks and keyframes follow).
 */
static inline __attribute__((always_inline)) int pair_counted(struct mt_instance *in,
                                                              const struct mt_event *a,
                                                              const struct mt_event *f,
                                                              uint32_t *stat)
{
	struct mt_instance_priv *p = in->priv;
	struct live *l = p->live;
	struct mt_kind_stats *k = &in->kind[a->kind];
	uint64_t key = mt_block_key(a->fn, a->addr);
	struct stat_hot *s;
	int ret;

	if (in->sampling || a->addr == 0 || key != mt_block_key(f->fn, f->addr) ||
	    k->live_bytes + a->size > k->peak_bytes || l->host.count >= l->host.limit ||
	    mt_map_get_small(&l->host, key, HOST_SHIFT, HOST_VOFF))
		return 0;
	if ((ret = stat_of(in, (enum mt_kind)a->kind, in->id, (uint32_t)a->stack, stat)) < 0)
		return ret;
	s = &p->hot[*stat];
	s->allocations++;
	s->bytes_allocated += a->size;
	k->allocations++;
	k->bytes_allocated += a->size;
	k->frees++;
	in->last_free_size = a->size;
	return 1;
}

/*
 * pair_counted in the full replay, of host blocks, with the traced figures
 * of the samples (the bytes live just before the free were the most). The
 * stack's growth and peak figures are brought up to date at its next
 * change, as they would be. The block leaves the young list as it was (its
 * pages are never counted; a big one's entry in the big map comes and
 * goes). Also one by one: a checkpoint or a child's fork between the two
 * (each takes the live set at its moment).
 */
static inline __attribute__((always_inline)) int apply_pair(struct mt_instance *in,
                                                            const struct mt_event *a,
                                                            const struct mt_event *f,
                                                            uint64_t next_fork)
{
	struct mt_instance_priv *p = in->priv;
	uint64_t traced;
	uint32_t i;
	int ret = 0;

	if (a->kind != MT_KIND_HOST || p->next_even_tick < f->time || next_fork < f->time ||
	    (ret = pair_counted(in, a, f, &i)) <= 0)
		return ret;
	traced = in->kind[MT_KIND_HOST].live_bytes + in->kind[MT_KIND_MMAP].live_bytes + a->size;
	p->traced_before_last = traced;
	if (p->sample_waits && in->samples[in->nsamples - 1].traced_max < traced)
		in->samples[in->nsamples - 1].traced_max = traced;
	p->sample_waits = false;
	if (p->traced_most < traced)
		p->traced_most = traced;
	return 1;
}

/* apply() for a unit that holds its event. Inline: the ring's consumer and the report's feed
 * call it once an event. */
static inline __attribute__((always_inline)) int
apply_event(struct mt_instance *in, const struct mt_event *ev, uint64_t key, bool first_half)
{
	struct live *l = in->priv->live;

	in->priv->now = key;
	switch (ev->type) {
	case MT_REC_ALLOC:
		return event_alloc(in, l, ev->fn, ev->addr, ev->size, ev->stack,
		                   (enum mt_kind)ev->kind);
	case MT_REC_FREE:
		return event_free(in, l, ev->fn, ev->addr, (enum mt_kind)ev->kind);
	default: /* MT_REC_REALLOC */
		return event_realloc(in, l, first_half, ev->old, ev->addr, ev->size, ev->stack);
	}
}

/*
 * Applies a record at `key`, or the first half of a realloc or mremap when
 * first_half; *tracked carries whether an mremap's first half found a
 * mapping of ours from one half to the other.
 */
static int apply(struct mt_instance *in, const struct mt_record *rec, uint64_t key, bool first_half,
                 bool *tracked)
{
	struct live *l = in->priv->live;
	uint64_t removed;
	int ret = 0;

	in->priv->now = key;
	switch (rec->type) {
	case MT_REC_ALLOC:
		return event_alloc(in, l, rec->u.alloc.fn, rec->u.alloc.addr, rec->u.alloc.size,
		                   rec->u.alloc.stack, (enum mt_kind)rec->u.alloc.kind);
	case MT_REC_FREE:
		return event_free(in, l, rec->u.free.fn, rec->u.free.addr,
		                  (enum mt_kind)rec->u.free.kind);
	case MT_REC_REALLOC:
		return event_realloc(in, l, first_half, rec->u.realloc.old, rec->u.realloc.addr,
		                     rec->u.realloc.size, rec->u.realloc.stack);
	case MT_REC_FAIL: {
		enum mt_kind kind = (enum mt_kind)rec->u.fail.kind;
		in->kind[kind].failed++;
		if (in->nfails < MT_REPLAY_MAX_FAILS) {
			if (!in->fails) {
				in->fails = calloc(MT_REPLAY_MAX_FAILS, sizeof(*in->fails));
				if (!in->fails)
					return -ENOMEM;
			}
			in->fails[in->nfails++] = (struct mt_fail_event){
			        .time = rec->time,
			        .offset = rec->offset,
			        .fn = (uint32_t)rec->u.fail.fn,
			        .err = (uint32_t)rec->u.fail.err,
			        .size = rec->u.fail.size,
			        .stack = (uint32_t)rec->u.fail.stack,
			        .kind = kind,
			        .device_free = rec->u.fail.device_free,
			        .device_total = rec->u.fail.device_total,
			};
		}
		return 0;
	}
	case MT_REC_MMAP:
		return ranges_add(in, l, rec->u.mmap.addr, rec->u.mmap.len,
		                  (uint32_t)rec->u.mmap.stack, in->id, true, rec->u.mmap.len);
	case MT_REC_MUNMAP:
		ret = ranges_remove(in, l, rec->u.munmap.addr, page_round(rec->u.munmap.len),
		                    &removed);
		if (removed)
			in->kind[MT_KIND_MMAP].frees++;
		return ret;
	case MT_REC_MREMAP:
		if (first_half) {
			ret = ranges_remove(in, l, rec->u.mremap.old,
			                    page_round(rec->u.mremap.old_len), &removed);
			/* a file mapping moved: not ours before, not ours after */
			*tracked = removed != 0;
			return ret;
		}
		if (*tracked)
			ret = ranges_add(in, l, rec->u.mremap.addr, rec->u.mremap.len,
			                 (uint32_t)rec->u.mremap.stack, in->id, false,
			                 rec->u.mremap.len > rec->u.mremap.old_len
			                         ? rec->u.mremap.len - rec->u.mremap.old_len
			                         : 0);
		*tracked = false;
		return ret;
	case MT_REC_SAMPLE:
		in->sample_count++;
		in->sample_time = rec->time;
		memcpy(in->sample, rec->u.sample.values, sizeof(in->sample));
		return add_sample(in, rec);
	case MT_REC_MARK:
		return add_mark(in, rec);
	default:
		return 0;
	}
}

/* Seeds a forked child with its parent's live set, accounted as the child's own. */
static int seed_child(struct mt_instance *in)
{
	struct mt_instance_priv *p = in->priv;
	struct live *seed = p->seed;
	uint64_t key;
	void *v;
	int ret;

	p->seed = NULL;
	p->live = seed;
	p->now = in->start_time;
	for (size_t i = 0; mt_map_next(&seed->host, &i, &key, &v);) {
		struct host_block *h = v;
		struct block_val b = block_get(seed, key, h);
		/* the parent's figures name the block's stack; the child's own take it from here */
		struct stat_id from = seed->owner->ids[h->stat];
		enum mt_kind kind = (enum mt_kind)seed->owner->hot[h->stat].kind;
		uint64_t bytes = block_bytes(in, &b, kind);
		ret = stat_of(in, kind, from.stack_instance, from.stack, &h->stat);
		if (ret < 0)
			return ret;
		adjust_at(in, h->stat, (int64_t)bytes, b.blocks, 0, 0);
		in->kind[kind].inherited_bytes += bytes;
		in->kind[kind].inherited_blocks += b.blocks;
	}
	seed->owner->seeds_out--;
	stats_release(seed->owner);
	seed->owner = p;
	for (size_t i = 0; i < seed->nranges; i++) {
		struct range *rg = &seed->ranges[i];
		ret = adjust(in, MT_KIND_MMAP, rg->stack_instance, rg->stack, (int64_t)rg->len, 1,
		             false, 0);
		if (ret < 0)
			return ret;
		in->kind[MT_KIND_MMAP].inherited_bytes += rg->len;
		in->kind[MT_KIND_MMAP].inherited_blocks++;
	}
	return 0;
}

/*
 * A ring's instance starts from its keyframe: the live set and the
 * running totals as the consumer had them at the keyframe's moment, each
 * stack's totals and its figures at its kind's all-time peak.
 */
static int load_keyframe(struct mt_instance *in, const struct mt_keyframe *kf)
{
	struct mt_instance_priv *p = in->priv;
	struct live *l = p->live;
	int ret;

	p->now = kf->time;
	in->window_start = kf->time;
	for (uint32_t i = 0; i < kf->nkinds; i++) {
		const struct mt_key_kind *k = &kf->kinds[i];
		struct mt_kind_stats *s = &in->kind[k->kind];
		s->allocations = k->allocations;
		s->frees = k->frees;
		s->bytes_allocated = k->bytes_allocated;
		s->peak_bytes = k->peak_bytes;
		s->peak_blocks = k->peak_blocks;
		s->peak_time = k->peak_time;
		s->failed = k->failed;
		s->unknown_frees = k->unknown_frees;
		s->inherited_bytes = k->inherited_bytes;
		s->inherited_blocks = k->inherited_blocks;
	}
	for (uint64_t i = 0; i < kf->nblocks; i++) {
		const struct mt_key_block *kb = &kf->blocks[i];
		struct host_block *b;
		struct block_val v;
		uint32_t stat;
		bool created;

		ret = stat_of(in, (enum mt_kind)kb->kind, kb->stack_instance, kb->stack, &stat);
		if (ret < 0)
			return ret;
		b = mt_map_put_small(&l->host, kb->addr, &created, HOST_SHIFT, HOST_VOFF,
		                     sizeof(*b));
		if (!b)
			return -ENOMEM;
		if (!created)
			block_reset(l, kb->addr, b);
		v = (struct block_val){kb->size, stat, kb->blocks};
		if ((ret = block_set(l, kb->addr, b, &v)) < 0)
			return ret;
		if (kb->kind == MT_KIND_HOST && keeps_pages(in) &&
		    (ret = mt_heap_pages_add(&l->pages, kb->addr, kb->size)) < 0)
			return ret;
		adjust_at(in, stat, (int64_t)block_bytes(in, &v, (enum mt_kind)kb->kind),
		          kb->blocks, 0, 0);
	}
	for (uint64_t i = 0; i < kf->nranges; i++) {
		const struct mt_key_block *kr = &kf->ranges[i];
		ret = range_insert(
		        l, l->nranges,
		        (struct range){kr->addr, kr->size, kr->stack, kr->stack_instance});
		if (ret == 0)
			ret = adjust(in, MT_KIND_MMAP, kr->stack_instance, kr->stack,
			             (int64_t)kr->size, 1, 0, 0);
		if (ret < 0)
			return ret;
	}
	for (uint64_t i = 0; i < kf->nstacks; i++) {
		const struct mt_key_stack *ks = &kf->stacks[i];
		struct stat_hot *s;
		uint32_t stat;
		/* makes the stack's entry if it holds nothing now */
		ret = stat_of(in, (enum mt_kind)ks->kind, ks->stack_instance, ks->stack, &stat);
		if (ret < 0)
			return ret;
		s = &p->hot[stat];
		s->allocations = ks->allocations;
		s->bytes_allocated = ks->bytes_allocated;
		/* the peak's figures stand until the window makes a new peak of the kind */
		s->peak_bytes = ks->peak_bytes;
		s->peak_blocks = ks->peak_blocks;
	}
	return 0;
}

static int cmp_child(const void *a, const void *b)
{
	const struct mt_instance *x = *(struct mt_instance *const *)a,
	                         *y = *(struct mt_instance *const *)b;

	if (x->start_time != y->start_time)
		return x->start_time < y->start_time ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* What the first pass takes whole: a stack's frames, a Python stack, a code object. */
static bool is_definition(uint8_t type)
{
	return type == MT_REC_STACK || type == MT_REC_PYSTACK || type == MT_REC_PYCODE;
}

static int replay_instance(struct mt_replay *r, struct mt_instance *in,
                           const struct mt_replay_callbacks *cb, void *ctx, struct mt_error *err)
{
	struct mt_instance_priv *p = in->priv;
	/* read once: a call through cb could change them as far as the compiler knows */
	int (*on_before)(void *, const struct mt_instance *, const struct mt_record *, uint64_t) =
	        cb ? cb->before : NULL;
	int (*on_record)(void *, const struct mt_instance *, const struct mt_record *) =
	        cb ? cb->record : NULL;
	int (*on_event)(void *, const struct mt_instance *, const struct mt_event *, uint32_t) =
	        cb && !on_before ? cb->event : NULL;
	int (*on_pair)(void *, const struct mt_instance *, const struct mt_event *, uint32_t,
	               const struct mt_event *, uint32_t) = on_event ? cb->pair : NULL;
	/* an ALLOC and its FREE at once where no callback wants each of them on its own: the flag
	 * a pair's unit is tested for, or none */
	const uint8_t pairs =
	        !on_before && (on_event ? on_pair != NULL : !on_record) ? MT_UNIT_PAIR : 0;
	const bool skip_definitions = cb && cb->skip_definitions;
	struct mt_feed_stream *streams = NULL;
	struct mt_feed *feed = NULL;
	const struct mt_unit *u;
	const struct mt_record *rec;
	struct mt_instance **children = NULL;
	bool *tracked = NULL;
	size_t nchildren = 0, next_child = 0;
	int ret = -ENOMEM;

	p->fit = &r->fit;
	p->even_start = in->have_process ? in->start_time : p->first_time;
	if (p->kf && p->kf->time > p->even_start)
		p->even_start = p->kf->time; /* growth over the window the ring kept */
	if (!in->program_end || in->program_end > in->end_time)
		in->program_end = in->end_time;
	p->even_end = in->program_end > p->even_start ? in->program_end : p->even_start;
	in->series.marks = in->marks_total >= MT_GROWTH_WINDOWS;
	in->series.n = in->series.marks ? in->marks_total : MT_EVEN_CHECKPOINTS;
	in->series.start_ns = mt_clock_ns(&r->fit, p->even_start);
	in->series.end_ns = mt_clock_ns(&r->fit, p->even_end);
	p->next_even_tick = even_tick(p, 0);
	if (p->seed && !p->kf) {
		ret = seed_child(in);
		if (ret < 0)
			goto out;
	} else {
		seed_drop(p->seed);
		p->seed = NULL;
		p->live = live_new(p);
		if (!p->live || (p->kf && (ret = load_keyframe(in, p->kf)) < 0))
			goto out;
	}
	children = calloc(p->nchildren + 1, sizeof(*children));
	streams = calloc(p->nthreads + 1, sizeof(*streams));
	tracked = calloc(p->nthreads + 1, sizeof(*tracked));
	if (!children || !streams || !tracked)
		goto out;
	for (uint32_t i = 0; i < p->nchildren; i++) {
		struct mt_instance *c = &r->instances[p->children[i]];
		if (!c->replayed)
			children[nchildren++] = c;
	}
	if (nchildren)
		qsort(children, nchildren, sizeof(*children), cmp_child);

	for (uint32_t t = 0; t < p->nthreads; t++) {
		streams[t] = (struct mt_feed_stream){p->threads[t].chunks, p->threads[t].n, NULL};
		for (uint64_t k = 0; p->kf && k < p->kf->nthreads; k++)
			if (p->kf->threads[k].tid == p->threads[t].tid)
				streams[t].resume = &p->kf->threads[k];
	}
	ret = mt_feed_start(&feed, r->trace, streams, p->nthreads, feed_thread(r, in));
	if (ret < 0)
		goto out;
	while ((ret = mt_feed_next(feed, &u, err)) > 0) {
		uint64_t key = mt_unit_key(u);
		bool first_half = u->flags & MT_UNIT_FIRST_HALF;

		/* worth its work only where the tables outgrow the caches close to the core */
		if (p->live->host.cap >= PREFETCH_BLOCKS || p->nstats >= PREFETCH_STATS) {
			const struct mt_unit *far = mt_feed_peek(feed, PREFETCH_FAR),
			                     *near = mt_feed_peek(feed, PREFETCH_NEAR);
			if (far)
				prefetch_far(p, far);
			if (near)
				prefetch_near(in, near);
		}
		if (p->next_even_tick < key && (ret = even_checkpoints(in, key, false)) < 0)
			goto out;
		/* the children forked before this moment get the live set as it is now */
		while (next_child < nchildren && children[next_child]->start_time < key) {
			seed_drop(children[next_child]->priv->seed);
			children[next_child]->priv->seed = live_copy(p->live);
			if (!children[next_child++]->priv->seed) {
				ret = -ENOMEM;
				goto out;
			}
		}
		if ((u->flags & pairs) &&
		    (ret = apply_pair(in, &u->ev, &u[1].ev,
		                      next_child < nchildren ? children[next_child]->start_time
		                                             : UINT64_MAX)) != 0) {
			if (ret < 0)
				goto out;
			if (on_pair &&
			    (ret = on_pair(ctx, in, &u->ev, u->stream, &u[1].ev, u[1].stream)) != 0)
				goto out;
			/* the FREE taken: mt_feed_next gives u + 1 */
			mt_feed_next(feed, &u, err);
			continue;
		}
		if (!(u->flags & MT_UNIT_WHOLE) && !on_before) {
			/* an event whose fields the unit holds: its record only if asked for */
			if ((ret = apply_event(in, &u->ev, key, first_half)) < 0)
				goto out;
			if (first_half)
				continue;
			if (on_event)
				ret = on_event(ctx, in, &u->ev, u->stream);
			else if (on_record && (ret = mt_feed_record(feed, u, &rec, err)) >= 0)
				ret = on_record(ctx, in, rec);
			if (ret)
				goto out;
			continue;
		}
		if (skip_definitions && is_definition(u->ev.type)) {
			p->now = key; /* as apply() sets it: nothing else of it is new */
			continue;
		}
		if ((ret = mt_feed_record(feed, u, &rec, err)) < 0)
			goto out;
		if (on_before && (ret = on_before(ctx, in, rec, key)) != 0)
			goto out;
		ret = apply(in, rec, key, first_half, &tracked[u->stream]);
		if (ret < 0)
			goto out;
		if (first_half)
			continue;
		if (on_record && (ret = on_record(ctx, in, rec)) != 0)
			goto out;
	}
	if (ret < 0)
		goto out;
	traced_fold(in);
	for (; next_child < nchildren; next_child++) {
		seed_drop(children[next_child]->priv->seed);
		children[next_child]->priv->seed = live_copy(p->live);
		if (!children[next_child]->priv->seed) {
			ret = -ENOMEM;
			goto out;
		}
	}
	ret = even_checkpoints(in, 0, true);
	if (ret < 0)
		goto out;
	finish_stack_stats(in);
	if (p->growth_failed) {
		ret = -ENOMEM;
		goto out;
	}
	in->replayed = true;
	if (cb && cb->instance_done)
		ret = cb->instance_done(ctx, r, in);
	p->stats_done = true;
	stats_release(p);
out:
	if (ret == -ENOMEM && err) {
		err->offset = 0;
		snprintf(err->message, sizeof(err->message), "out of memory");
	}
	mt_feed_stop(feed);
	for (int k = 0; k < MT_KIND_COUNT; k++)
		mt_by_stack_free(&p->own_stat[k]); /* a cache of stat_index, for the replay only */
	live_free(p->live);
	p->live = NULL;
	free(children);
	free(streams);
	free(tracked);
	return ret;
}

int mt_replay_run(struct mt_replay *r, const struct mt_replay_callbacks *cb, void *ctx,
                  struct mt_error *err)
{
	for (uint32_t i = 0; i < r->ninstances; i++) {
		struct mt_instance *in = &r->instances[i];
		int ret;

		if (in->replayed)
			continue;
		ret = replay_instance(r, in, cb, ctx, err);
		if (ret)
			return ret;
	}
	return 0;
}

void mt_replay_free(struct mt_replay *r)
{
	if (!r)
		return;
	for (uint32_t i = 0; i < r->ninstances; i++) {
		struct mt_instance *in = &r->instances[i];
		struct mt_instance_priv *p = in->priv;

		free(in->exe);
		free(in->cmdline);
		free(in->exec_path);
		free(in->fails);
		free(in->samples);
		for (uint32_t m = 0; m < in->nmarks; m++)
			free(in->marks[m].label);
		free(in->marks);
		for (uint32_t m = 0; m < in->nmodules; m++) {
			free(in->modules[m].path);
			free(in->modules[m].seg);
		}
		free(in->modules);
		if (!p)
			continue;
		mt_map_free(&p->stacks);
		mt_frame_tree_free(&p->frames);
		mt_pystacks_free(&p->py);
		mt_map_free(&p->thread_index);
		for (uint32_t t = 0; t < p->nthreads; t++)
			free(p->threads[t].chunks);
		free(p->threads);
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			mt_map_free(&p->stat_index[k]);
			mt_by_stack_free(&p->own_stat[k]);
		}
		free(p->hot);
		free(p->ids);
		free(p->synced);
		free(p->growth);
		live_free(p->live);
		live_free(p->seed);
		free(p->children);
		free(p->cp_px);
		free(p->cp_marks);
		free(p);
	}
	free(r->instances);
	mt_map_free(&r->index);
	mt_keyframes_free(&r->kf);
	free(r);
}

const struct mt_keyframes *mt_replay_keyframes(const struct mt_replay *r)
{
	return &r->kf;
}

uint32_t mt_replay_instance_count(const struct mt_replay *r)
{
	return r->ninstances;
}

const struct mt_instance *mt_replay_instance(const struct mt_replay *r, uint32_t index)
{
	return index < r->ninstances ? &r->instances[index] : NULL;
}

const struct mt_instance *mt_replay_find_instance(const struct mt_replay *r, uint32_t id)
{
	const uint32_t *idx = mt_map_get(&r->index, id);

	return idx ? &r->instances[*idx] : NULL;
}

const struct mt_trace_stats *mt_replay_trace_stats(const struct mt_replay *r)
{
	return &r->stats;
}

const struct mt_clock_fit *mt_replay_clock(const struct mt_replay *r)
{
	return &r->fit;
}

const uint64_t *mt_replay_frames(const struct mt_instance *in, uint32_t *n)
{
	const struct mt_frame_tree *t = &in->priv->frames;

	/* node 0 is the root, no frame */
	*n = t->n > 1 ? t->n - 1 : 0;
	return t->frame ? t->frame + 1 : NULL;
}

int mt_replay_stack(const struct mt_replay *r, uint32_t instance, uint32_t id,
                    uint64_t frames[MT_MAX_DEPTH], uint32_t *n, uint32_t *gen)
{
	const struct mt_instance *in = mt_replay_find_instance(r, instance);
	const struct stack_entry *e;

	if (!in || !(e = mt_map_get(&in->priv->stacks, id)))
		return -ENOENT;
	*n = mt_frame_tree_get(&in->priv->frames, e->node, frames, MT_MAX_DEPTH);
	if (gen)
		*gen = e->gen;
	return 0;
}

int mt_replay_stack_walk(const struct mt_replay *r, uint32_t instance, uint32_t id,
                         struct mt_frame_walk *w)
{
	const struct mt_instance *in = mt_replay_find_instance(r, instance);
	const struct stack_entry *e;

	if (!in || !(e = mt_map_get(&in->priv->stacks, id)))
		return -ENOENT;
	*w = (struct mt_frame_walk){&in->priv->frames, e->node};
	return 0;
}

int mt_replay_pystack(const struct mt_replay *r, uint32_t instance, uint32_t id,
                      const struct mt_pyframe **frames, uint32_t *n)
{
	const struct mt_instance *in = mt_replay_find_instance(r, instance);

	if (!in || !mt_map_get(&in->priv->stacks, id))
		return -ENOENT;
	*n = mt_pystacks_frames(&in->priv->py, id, frames);
	return 0;
}

const struct mt_pycode *mt_replay_pycode(const struct mt_replay *r, uint32_t instance,
                                         uint64_t code)
{
	const struct mt_instance *in = mt_replay_find_instance(r, instance);

	return in ? mt_pystacks_code(&in->priv->py, code) : NULL;
}

int mt_replay_foreach_live(struct mt_replay *r, const struct mt_instance *in,
                           int (*fn)(void *ctx, const struct mt_block *b), void *ctx)
{
	const struct live *l = in->priv->live;
	uint64_t key;
	void *v;
	int ret;

	(void)r;
	if (!l)
		return -EINVAL;
	for (size_t i = 0; mt_map_next(&l->host, &i, &key, &v);) {
		const struct host_block *h = v;
		const struct block_val bv = block_get(l, key, h);
		const struct stat_id *id = &l->owner->ids[bv.stat];
		enum mt_kind kind = (enum mt_kind)l->owner->hot[bv.stat].kind;
		struct mt_block b = {key,       block_bytes(in, &bv, kind),
		                     id->stack, id->stack_instance,
		                     kind,      bv.blocks,
		                     bv.size};
		if ((ret = fn(ctx, &b)))
			return ret;
	}
	for (size_t i = 0; i < l->nranges; i++) {
		const struct range *rg = &l->ranges[i];
		struct mt_block b = {rg->addr,     rg->len, rg->stack, rg->stack_instance,
		                     MT_KIND_MMAP, 1,       rg->len};
		if ((ret = fn(ctx, &b)))
			return ret;
	}
	return 0;
}

int mt_replay_foreach_stack(struct mt_replay *r, const struct mt_instance *in,
                            int (*fn)(void *ctx, const struct mt_stack_stats *s), void *ctx)
{
	struct mt_stack_stats view;

	(void)r;
	/* a lean replay's stat_index holds only other instances' stacks: in the order made */
	for (uint32_t i = 0; in->priv->lean && i < in->priv->nstats; i++) {
		int ret = fn(ctx, stat_view(in, i, &view));
		if (ret)
			return ret;
	}
	for (int kind = 0; kind < MT_KIND_COUNT && !in->priv->lean; kind++) {
		uint64_t key;
		void *v;
		int ret;
		for (size_t i = 0; mt_map_next(&in->priv->stat_index[kind], &i, &key, &v);)
			if ((ret = fn(ctx, stat_view(in, *(uint32_t *)v, &view))))
				return ret;
	}
	return 0;
}

/*
 * ---- The ring's consumer (ring.c): the same replay, fed record by record
 * as the chunks are written, an instance's live set and totals kept for
 * its keyframes. Nothing of a moment is kept (no samples, marks, growth or
 * heap pages): its memory grows with live blocks and stacks only.
 */

struct mt_replay *mt_replay_stream_new(const struct mt_trace *trace)
{
	struct mt_replay *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->trace = trace;
	r->fit = trace->fit;
	r->kf_read = true;
	mt_map_init(&r->index, sizeof(uint32_t));
	mt_keyframes_init(&r->kf);
	return r;
}

struct mt_instance *mt_replay_stream_instance(struct mt_replay *r, uint32_t id)
{
	struct mt_instance *in = get_instance(r, id);

	if (in)
		in->priv->lean = true;
	return in;
}

int mt_replay_stream_define(struct mt_replay *r, struct mt_instance *in,
                            const struct mt_record *rec)
{
	return first_pass_record(r, in, rec);
}

int mt_replay_stream_begin(struct mt_instance *in, const struct mt_instance *parent)
{
	struct mt_instance_priv *p = in->priv;

	if (parent && parent->priv->live) {
		p->seed = live_copy(parent->priv->live);
		return p->seed ? seed_child(in) : -ENOMEM;
	}
	p->live = live_new(p);
	return p->live ? 0 : -ENOMEM;
}

bool mt_replay_stream_begun(const struct mt_instance *in)
{
	return in->priv->live != NULL;
}

int mt_replay_stream_apply(struct mt_instance *in, const struct mt_record *rec, int phase,
                           uint64_t key, bool *mremap_tracked)
{
	return apply(in, rec, key, phase == 0, mremap_tracked);
}

int mt_replay_stream_apply_event(struct mt_instance *in, const struct mt_event *ev, int phase,
                                 uint64_t key)
{
	return apply_event(in, ev, key, phase == 0);
}

/*
 * pair_counted in the ring's consumer (a lean replay: no pages, growth or
 * samples' traced figures), with the stack's peak figures brought up to
 * the kind's epoch and now. Also one by one: a big block (the big map).
 */
int mt_replay_stream_apply_pair(struct mt_instance *in, const struct mt_event *alloc,
                                const struct mt_event *free_ev)
{
	struct mt_instance_priv *p = in->priv;
	struct stat_hot *s;
	uint32_t i;
	int ret = 0;

	if (!p->lean || alloc->size >= HOST_BIG ||
	    (ret = pair_counted(in, alloc, free_ev, &i)) <= 0)
		return ret;
	s = &p->hot[i];
	if (s->epoch != p->epoch[alloc->kind]) {
		s->peak_bytes = s->live_bytes;
		s->peak_blocks = s->live_blocks;
		s->epoch = p->epoch[alloc->kind];
	}
	p->now = free_ev->time;
	return 1;
}

void mt_replay_stream_peaks(struct mt_instance *in)
{
	finish_stack_stats(in);
}

uint64_t mt_replay_stream_items(const struct mt_instance *in)
{
	const struct mt_instance_priv *p = in->priv;

	return p->live ? p->live->host.count + p->live->nranges + p->nstats : 0;
}

struct mt_instance *mt_replay_find_instance_mut(struct mt_replay *r, uint32_t id)
{
	const uint32_t *idx = mt_map_get(&r->index, id);

	return idx ? &r->instances[*idx] : NULL;
}
