/* SPDX-License-Identifier: MIT */
/*
 * The shared analysis (see analysis.h). The replay keeps the live set, the
 * totals and the per-stack figures; this module adds, from the replay's
 * record callback, what the replay does not know: temporary allocations,
 * the size histogram and the memory held at each failed allocation (with
 * the last sample before it); it feeds the diagnosis (diagnosis.h) the
 * frees and large allocations that move glibc's mmap threshold, and every
 * stack's growth sums at the end of an instance.
 *
 * A temporary allocation (heaptrack's definition) is a block freed before
 * the thread that allocated it made another allocation of the same kind. A
 * thread has at most one block that may still turn out temporary, so the
 * table of candidates has one entry per thread: the work per event stays
 * O(1) and the memory does not grow with events. realloc counts as a free
 * of the old block and an allocation of the new one, as in heaptrack.
 *
 * May not: print; symbolize anything before a command asks for frames.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "by-stack.h"
#include "frames.h"
#include "map.h"
#include "prefetch.h"

/* What every event runs, written into its callers: a call's cost is much of its own. */
#define HOT static inline __attribute__((always_inline))

/* munmap works in pages: the replay rounds lengths the same way. */
#define PAGE_ROUND     4096u
#define PROGRESS_EVERY (1u << 20)

/* A thread's last allocation of one kind, while it may still be temporary. */
struct candidate {
	uint32_t thread; /* index into run->threads */
	uint32_t stack;
	uint64_t size;
};

/* A thread's last allocation of each kind: a temporary if freed before its next one. */
struct thread_state {
	uint64_t addr[MT_KIND_COUNT];
	bool pending[MT_KIND_COUNT];
	struct candidate cand[MT_KIND_COUNT];
};

/*
 * With few threads a free finds its candidate by looking at each thread's;
 * with more, through the candidates maps (kept from the moment the count
 * passes this).
 */
#define SCAN_THREADS 8

struct mt_analysis_run {
	struct mt_analysis *a;
	struct mt_analysis_hooks hooks;
	uint64_t events_done;
	uint64_t next_progress;
	const struct mt_instance *in; /* the instance whose records arrive */
	struct mt_process_result *res;
	/* threads of the instance, found by the chunk pointer its stream keeps */
	/* the instance's threads (the replay's index, rec->thread) -> index + 1 into threads, in
	 * the order they first allocated */
	uint32_t *by_stream;
	uint32_t nby_stream;
	struct mt_record *scratch; /* an event as a record, for the leak classes after the scan */
	struct thread_state *threads;
	uint32_t nthreads, threads_cap;
	struct mt_map candidates[MT_KIND_COUNT];         /* addr -> struct candidate */
	struct mt_by_stack temp_by_stack[MT_KIND_COUNT]; /* temporary allocations by stack */
	/* the failed allocation being snapshot */
	struct mt_fail_snapshot *snap;
	enum mt_kind snap_kind;
	struct mt_reach reach; /* the instance's leak classes */
};

static const char *const metric_names[MT_METRIC_COUNT] = {
        [MT_METRIC_PEAK] = "peak",           [MT_METRIC_LEAKED] = "leaked",
        [MT_METRIC_ALLOCATED] = "allocated", [MT_METRIC_ALLOCATIONS] = "allocations",
        [MT_METRIC_TEMPORARY] = "temporary",
};

const char *mt_metric_name(enum mt_metric m)
{
	return m < MT_METRIC_COUNT ? metric_names[m] : "unknown";
}

int mt_metric_parse(const char *name)
{
	for (int m = 0; m < MT_METRIC_COUNT; m++)
		if (!strcmp(name, metric_names[m]))
			return m;
	return -EINVAL;
}

uint64_t mt_stack_row_value(const struct mt_stack_row *row, enum mt_metric m)
{
	switch (m) {
	case MT_METRIC_PEAK:
		return row->peak_bytes;
	case MT_METRIC_LEAKED:
		return row->leaked_bytes;
	case MT_METRIC_ALLOCATED:
		return row->bytes_allocated;
	case MT_METRIC_ALLOCATIONS:
		return row->allocations;
	case MT_METRIC_TEMPORARY:
		return row->temporary;
	default:
		return 0;
	}
}

uint64_t mt_kind_result_total(const struct mt_kind_result *k, enum mt_metric m)
{
	switch (m) {
	case MT_METRIC_PEAK:
		return k->stats.peak_bytes;
	case MT_METRIC_LEAKED:
		return k->leaked_bytes;
	case MT_METRIC_ALLOCATED:
		return k->stats.bytes_allocated;
	case MT_METRIC_ALLOCATIONS:
		return k->stats.allocations;
	case MT_METRIC_TEMPORARY:
		return k->temporary;
	default:
		return 0;
	}
}

static enum mt_metric sort_metric;

/* A leak's rank: lost first, then possible, then reachable. */
static void leak_rank(const struct mt_stack_row *r, uint64_t rank[3])
{
	rank[0] = mt_stack_row_reach(r, MT_LEAK_DEFINITE).bytes +
	          mt_stack_row_reach(r, MT_LEAK_INDIRECT).bytes +
	          mt_stack_row_reach(r, MT_LEAK_UNCLASSIFIED).bytes;
	rank[1] = mt_stack_row_reach(r, MT_LEAK_POSSIBLE).bytes;
	rank[2] = mt_stack_row_reach(r, MT_LEAK_REACHABLE).bytes;
}

static int cmp_rows(const void *a, const void *b)
{
	const struct mt_stack_row *x = a, *y = b;
	uint64_t vx = mt_stack_row_value(x, sort_metric), vy = mt_stack_row_value(y, sort_metric);

	if (sort_metric == MT_METRIC_LEAKED) {
		uint64_t rx[3], ry[3];
		leak_rank(x, rx);
		leak_rank(y, ry);
		for (int i = 0; i < 3; i++)
			if (rx[i] != ry[i])
				return rx[i] > ry[i] ? -1 : 1;
	}
	if (vx != vy)
		return vx > vy ? -1 : 1;
	if (x->stack_instance != y->stack_instance)
		return x->stack_instance < y->stack_instance ? -1 : 1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

void mt_stack_rows_sort(struct mt_stack_row *rows, size_t n, enum mt_metric m)
{
	sort_metric = m;
	if (n > 1)
		qsort(rows, n, sizeof(*rows), cmp_rows);
}

uint64_t mt_analysis_since_start(const struct mt_analysis *a, const struct mt_instance *in,
                                 uint64_t ticks)
{
	const struct mt_clock_fit *fit = mt_replay_clock(a->replay);
	uint64_t t = mt_clock_ns(fit, ticks), s = mt_clock_ns(fit, in->start_time);

	return ticks && t > s ? t - s : 0;
}

/* ---- per record, during the replay ---- */

static void run_reset(struct mt_analysis_run *run)
{
	mt_reach_free(&run->reach);
	free(run->by_stream);
	run->by_stream = NULL;
	run->nby_stream = 0;
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		mt_map_free(&run->candidates[k]);
		mt_by_stack_free(&run->temp_by_stack[k]);
	}
	run->nthreads = 0;
}

static int begin_instance(struct mt_analysis_run *run, const struct mt_instance *in)
{
	struct mt_analysis *a = run->a;

	run_reset(run);
	run->in = in;
	run->res = &a->procs[in - mt_replay_instance(a->replay, 0)];
	run->res->in = in;
	return 0;
}

/* From now on frees find candidates through the maps: put the pending ones there. */
static int fill_maps(struct mt_analysis_run *run)
{
	for (uint32_t t = 0; t < run->nthreads; t++) {
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			struct candidate *c;
			bool created;
			if (!run->threads[t].pending[k])
				continue;
			c = mt_map_put(&run->candidates[k], run->threads[t].addr[k], &created);
			if (!c)
				return -ENOMEM;
			*c = run->threads[t].cand[k];
		}
	}
	return 0;
}

/* A thread's first event: its state, made in the order threads first allocate. */
static int thread_new(struct mt_analysis_run *run, uint32_t stream, uint32_t *out)
{
	if (stream >= run->nby_stream) {
		uint32_t n = stream + 1 > run->nby_stream * 2 ? stream + 1 : run->nby_stream * 2;
		uint32_t *p = realloc(run->by_stream, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + run->nby_stream, 0, (n - run->nby_stream) * sizeof(*p));
		run->by_stream = p;
		run->nby_stream = n;
	}
	if (!run->by_stream[stream]) {
		if (run->nthreads == run->threads_cap) {
			uint32_t cap = run->threads_cap ? run->threads_cap * 2 : 8;
			void *p = realloc(run->threads, cap * sizeof(*run->threads));
			if (!p)
				return -ENOMEM;
			run->threads = p;
			run->threads_cap = cap;
		}
		memset(&run->threads[run->nthreads], 0, sizeof(struct thread_state));
		run->by_stream[stream] = ++run->nthreads;
		if (run->nthreads == SCAN_THREADS + 1 && fill_maps(run) < 0)
			return -ENOMEM;
	}
	*out = run->by_stream[stream] - 1;
	return 0;
}

HOT int thread_of(struct mt_analysis_run *run, uint32_t stream, uint32_t *out)
{
	if (stream < run->nby_stream && run->by_stream[stream]) {
		*out = run->by_stream[stream] - 1;
		return 0;
	}
	return thread_new(run, stream, out);
}

static unsigned bucket_of(uint64_t size)
{
	return size ? 64u - (unsigned)__builtin_clzll(size) : 0u;
}

static bool use_maps(const struct mt_analysis_run *run)
{
	return run->nthreads > SCAN_THREADS;
}

/* note_alloc without the maps and the histogram's making: what it does that calls nothing. */
HOT void candidate_set(struct mt_analysis_run *run, uint32_t t, enum mt_kind k, uint64_t addr,
                       uint64_t size, uint64_t stack)
{
	struct thread_state *th = &run->threads[t];

	run->res->kind[k].histogram[bucket_of(size)]++;
	th->pending[k] = false;
	if (!addr)
		return;
	th->cand[k] = (struct candidate){t, (uint32_t)stack, size};
	th->addr[k] = addr;
	th->pending[k] = true;
}

/* An allocation of thread t: its previous candidate of the kind is no longer one. */
HOT int note_alloc(struct mt_analysis_run *run, uint32_t t, enum mt_kind k, uint64_t addr,
                   uint64_t size, uint64_t stack)
{
	struct thread_state *th = &run->threads[t];
	struct mt_kind_result *kr = &run->res->kind[k];
	struct candidate *c;
	bool created;

	if (!kr->histogram && !(kr->histogram = calloc(MT_HISTOGRAM_BUCKETS, sizeof(uint64_t))))
		return -ENOMEM;
	if (th->pending[k] && use_maps(run)) {
		c = mt_map_get(&run->candidates[k], th->addr[k]);
		if (c && c->thread == t)
			mt_map_del(&run->candidates[k], th->addr[k]);
	}
	candidate_set(run, t, k, addr, size, stack);
	if (addr && use_maps(run)) {
		c = mt_map_put(&run->candidates[k], addr, &created);
		if (!c)
			return -ENOMEM;
		*c = th->cand[k];
	}
	return 0;
}

/* candidate_of with few threads. */
HOT int candidate_scan(const struct mt_analysis_run *run, enum mt_kind k, uint64_t addr)
{
	for (uint32_t t = 0; t < run->nthreads; t++)
		if (run->threads[t].pending[k] && run->threads[t].addr[k] == addr)
			return (int)t;
	return -1;
}

/* Whether a thread before t has its candidate of kind k at addr (candidate_scan finds it first). */
HOT bool candidate_before(const struct mt_analysis_run *run, enum mt_kind k, uint64_t addr,
                          uint32_t t)
{
	for (uint32_t i = 0; i < t; i++)
		if (run->threads[i].pending[k] && run->threads[i].addr[k] == addr)
			return true;
	return false;
}

/* The thread whose candidate of kind k is addr, or -1. */
HOT int candidate_of(struct mt_analysis_run *run, enum mt_kind k, uint64_t addr)
{
	const struct candidate *c;

	if (!use_maps(run))
		return candidate_scan(run, k, addr);
	c = mt_map_get(&run->candidates[k], addr);
	return c ? (int)c->thread : -1;
}

/* Thread t's candidate of kind k freed: a temporary allocation, counted at *count. */
HOT void temporary(struct mt_analysis_run *run, enum mt_kind k, uint32_t t, uint64_t *count)
{
	run->threads[t].pending[k] = false;
	run->res->kind[k].temporary++;
	++*count;
}

/* A free of addr: a temporary allocation if it is some thread's candidate. */
HOT int note_free(struct mt_analysis_run *run, enum mt_kind k, uint64_t addr, uint64_t len)
{
	struct thread_state *th;
	uint64_t *count;
	int t = candidate_of(run, k, addr);

	if (t < 0)
		return 0;
	th = &run->threads[t];
	/* a munmap that leaves part of the mapping does not free the block */
	if (k == MT_KIND_MMAP && len < th->cand[k].size)
		return 0;
	count = mt_by_stack_at(&run->temp_by_stack[k], th->cand[k].stack);
	if (!count)
		return -ENOMEM;
	if (use_maps(run))
		mt_map_del(&run->candidates[k], addr);
	temporary(run, k, (uint32_t)t, count);
	return 0;
}

static int keep_top(void *ctx, const struct mt_stack_stats *s)
{
	struct mt_analysis_run *run = ctx;
	struct mt_fail_snapshot *snap = run->snap;
	struct mt_stack_row row = {0};
	uint32_t i;

	if (s->kind != run->snap_kind || !s->live_bytes)
		return 0;
	row.stack = s->stack;
	row.stack_instance = s->stack_instance;
	row.leaked_bytes = s->live_bytes;
	row.leaked_blocks = s->live_blocks;
	/* insertion into a short list kept largest first */
	i = snap->ntop < MT_FAIL_TOP_STACKS ? snap->ntop++ : MT_FAIL_TOP_STACKS;
	if (i == MT_FAIL_TOP_STACKS) {
		if (snap->top[i - 1].leaked_bytes >= row.leaked_bytes)
			return 0;
		i--;
	}
	while (i > 0 && snap->top[i - 1].leaked_bytes < row.leaked_bytes) {
		snap->top[i] = snap->top[i - 1];
		i--;
	}
	snap->top[i] = row;
	return 0;
}

static int note_fail(struct mt_analysis_run *run, const struct mt_instance *in,
                     const struct mt_record *rec)
{
	enum mt_kind k = (enum mt_kind)rec->u.fail.kind;
	struct mt_kind_result *kr = &run->res->kind[k];
	struct mt_fail_snapshot *snap;

	if (kr->nfails >= MT_ANALYSIS_MAX_FAILS)
		return 0;
	if (!kr->fails) {
		kr->fails = calloc(MT_ANALYSIS_MAX_FAILS, sizeof(*kr->fails));
		if (!kr->fails)
			return -ENOMEM;
	}
	snap = &kr->fails[kr->nfails++];
	snap->event = (struct mt_fail_event){
	        .time = rec->time,
	        .offset = rec->offset,
	        .fn = (uint32_t)rec->u.fail.fn,
	        .err = (uint32_t)rec->u.fail.err,
	        .size = rec->u.fail.size,
	        .stack = (uint32_t)rec->u.fail.stack,
	        .kind = k,
	        .device_free = rec->u.fail.device_free,
	        .device_total = rec->u.fail.device_total,
	};
	/* the replay's figures are current during the record callback */
	snap->live_bytes = in->kind[k].live_bytes;
	snap->live_blocks = in->kind[k].live_blocks;
	/* the replay has applied every sample up to this moment: the last one is before it */
	if (in->nsamples) {
		const struct mt_sample_point *sp = &in->samples[in->nsamples - 1];
		snap->have_sample_before = true;
		snap->heap_free_before = sp->values[MT_SAMPLE_HEAP_FREE];
		snap->rss_before = sp->values[MT_SAMPLE_RSS];
	}
	run->snap = snap;
	run->snap_kind = k;
	return mt_replay_foreach_stack(run->a->replay, in, keep_top, run);
}

HOT void tick_progress(struct mt_analysis_run *run)
{
	if (++run->events_done < run->next_progress)
		return;
	run->next_progress += PROGRESS_EVERY;
	if (run->hooks.progress)
		run->hooks.progress(run->hooks.progress_ctx, run->events_done, run->a->events);
}

HOT int event_alloc(struct mt_analysis_run *run, const struct mt_instance *in, uint32_t thread,
                    enum mt_kind kind, uint64_t fn, uint64_t addr, uint64_t size, uint64_t stack)
{
	uint32_t t;
	int r;

	if ((r = thread_of(run, thread, &t)) < 0)
		return r;
	if (kind == MT_KIND_HOST && addr &&
	    !mt_diagnosis_alloc_fast(&run->res->diag, in, addr, size))
		mt_diagnosis_note_alloc(&run->res->diag, in, addr, size);
	return note_alloc(run, t, kind, mt_block_key(fn, addr), size, stack);
}

HOT int event_free(struct mt_analysis_run *run, const struct mt_instance *in, enum mt_kind kind,
                   uint64_t fn, uint64_t addr, uint64_t time)
{
	int r;

	if (!addr)
		return 0;
	if (fn < MT_FN_CUDA_MALLOC && !mt_diagnosis_free_quiet(&run->res->diag, in->last_free_size))
		mt_diagnosis_note_free(&run->res->diag, in, in->last_free_size, time);
	if (fn < MT_FN_CUDA_MALLOC)
		return note_free(run, kind, addr, 0);
	/* a CUDA free does not say which device the block was on */
	for (int k = MT_KIND_CUDA_HOST; k < MT_KIND_COUNT; k++)
		if ((r = note_free(run, (enum mt_kind)k, mt_block_key(fn, addr), 0)) < 0)
			return r;
	return 0;
}

HOT int event_realloc(struct mt_analysis_run *run, const struct mt_instance *in, uint32_t thread,
                      uint64_t old, uint64_t addr, uint64_t size, uint64_t stack)
{
	uint32_t t;
	int r;

	if (old && (r = note_free(run, MT_KIND_HOST, old, 0)) < 0)
		return r;
	if (!addr)
		return 0; /* realloc(p, 0) freed p and allocated nothing */
	if ((r = thread_of(run, thread, &t)) < 0)
		return r;
	if (!mt_diagnosis_alloc_fast(&run->res->diag, in, addr, size))
		mt_diagnosis_note_alloc(&run->res->diag, in, addr, size);
	return note_alloc(run, t, MT_KIND_HOST, addr, size, stack);
}

static int analyze_record(struct mt_analysis_run *run, const struct mt_instance *in,
                          const struct mt_record *rec)
{
	uint32_t t;
	int r;

	if (in != run->in && (r = begin_instance(run, in)) < 0)
		return r;
	if ((rec->type == MT_REC_REACH || rec->type == MT_REC_REACH_BLOCKS ||
	     (run->reach.scan.seen && mt_record_is_event(rec->type))) &&
	    (r = mt_reach_note(&run->reach, rec)) < 0)
		return r;
	if (!mt_record_is_event(rec->type))
		return 0;
	tick_progress(run);
	switch (rec->type) {
	case MT_REC_ALLOC:
		return event_alloc(run, in, rec->thread, (enum mt_kind)rec->u.alloc.kind,
		                   rec->u.alloc.fn, rec->u.alloc.addr, rec->u.alloc.size,
		                   rec->u.alloc.stack);
	case MT_REC_FREE:
		return event_free(run, in, (enum mt_kind)rec->u.free.kind, rec->u.free.fn,
		                  rec->u.free.addr, rec->time);
	case MT_REC_REALLOC:
		return event_realloc(run, in, rec->thread, rec->u.realloc.old, rec->u.realloc.addr,
		                     rec->u.realloc.size, rec->u.realloc.stack);
	case MT_REC_MMAP:
		if ((r = thread_of(run, rec->thread, &t)) < 0)
			return r;
		return note_alloc(run, t, MT_KIND_MMAP, rec->u.mmap.addr,
		                  (rec->u.mmap.len + PAGE_ROUND - 1) & ~(uint64_t)(PAGE_ROUND - 1),
		                  rec->u.mmap.stack);
	case MT_REC_MUNMAP:
		return note_free(run, MT_KIND_MMAP, rec->u.munmap.addr,
		                 (rec->u.munmap.len + PAGE_ROUND - 1) &
		                         ~(uint64_t)(PAGE_ROUND - 1));
	case MT_REC_MREMAP:
		/* a mapping resized is neither freed nor new: no longer a candidate */
		if ((r = thread_of(run, rec->thread, &t)) < 0)
			return r;
		if (run->threads[t].pending[MT_KIND_MMAP] && use_maps(run))
			mt_map_del(&run->candidates[MT_KIND_MMAP],
			           run->threads[t].addr[MT_KIND_MMAP]);
		run->threads[t].pending[MT_KIND_MMAP] = false;
		return 0;
	case MT_REC_FAIL:
		return note_fail(run, in, rec);
	default:
		return 0;
	}
}

static int on_record(void *ctx, const struct mt_instance *in, const struct mt_record *rec)
{
	struct mt_analysis_run *run = ctx;
	int r = analyze_record(run, in, rec);

	if (r == 0 && run->hooks.record)
		r = run->hooks.record(run->hooks.record_ctx, run->a, in, rec);
	return r;
}

/*
 * What on_event does before an event's own work where it is rare: an instance's first event,
 * an event after the exit's scan (allocated then: unclassified; the scan is at the end).
 */
static __attribute__((noinline)) int event_first(struct mt_analysis_run *run,
                                                 const struct mt_instance *in,
                                                 const struct mt_event *ev, uint32_t thread)
{
	int r;

	if (in != run->in && (r = begin_instance(run, in)) < 0)
		return r;
	if (run->reach.scan.seen) {
		if (!run->scratch && !(run->scratch = calloc(1, sizeof(*run->scratch))))
			return -ENOMEM;
		mt_event_record(ev, run->scratch);
		run->scratch->thread = thread;
		if ((r = mt_reach_note(&run->reach, run->scratch)) < 0)
			return r;
	}
	return 0;
}

/*
 * Each type of event in a function of its own, which on_event jumps to (a tail call): the
 * dispatch itself then saves no registers. An allocation and a free go on in their own way
 * where that calls nothing (nearly always: a thread seen before, few threads, a host block,
 * nothing for the diagnosis, a stack the counts have room for), so that they save none
 * either; else they jump to the whole of event_alloc or event_free.
 */
static __attribute__((noinline)) int alloc_rare(struct mt_analysis_run *run,
                                                const struct mt_instance *in,
                                                const struct mt_event *ev, uint32_t thread)
{
	return event_alloc(run, in, thread, (enum mt_kind)ev->kind, ev->fn, ev->addr, ev->size,
	                   ev->stack);
}

/* An allocation's own work (on_alloc, on_pair). */
HOT int alloc_event(struct mt_analysis_run *run, const struct mt_instance *in,
                    const struct mt_event *ev, uint32_t thread)
{
	if (ev->kind != MT_KIND_HOST || thread >= run->nby_stream || !run->by_stream[thread] ||
	    use_maps(run) || !run->res->kind[MT_KIND_HOST].histogram ||
	    (ev->addr && !mt_diagnosis_alloc_fast(&run->res->diag, in, ev->addr, ev->size)))
		return alloc_rare(run, in, ev, thread);
	candidate_set(run, run->by_stream[thread] - 1, MT_KIND_HOST, mt_block_key(ev->fn, ev->addr),
	              ev->size, ev->stack);
	return 0;
}

static __attribute__((noinline)) int on_alloc(struct mt_analysis_run *run,
                                              const struct mt_instance *in,
                                              const struct mt_event *ev, uint32_t thread)
{
	return alloc_event(run, in, ev, thread);
}

static __attribute__((noinline)) int
free_rare(struct mt_analysis_run *run, const struct mt_instance *in, const struct mt_event *ev)
{
	return event_free(run, in, (enum mt_kind)ev->kind, ev->fn, ev->addr, ev->time);
}

/* A free's own work (on_free, on_pair). */
HOT int free_event(struct mt_analysis_run *run, const struct mt_instance *in,
                   const struct mt_event *ev)
{
	const enum mt_kind k = MT_KIND_HOST;
	int t;

	if (ev->kind != k || ev->fn >= MT_FN_CUDA_MALLOC || use_maps(run) ||
	    !mt_diagnosis_free_quiet(&run->res->diag, in->last_free_size))
		return free_rare(run, in, ev);
	if (!ev->addr || (t = candidate_scan(run, k, ev->addr)) < 0)
		return 0;
	if (run->threads[t].cand[k].stack >= run->temp_by_stack[k].cap)
		return free_rare(run, in, ev);
	temporary(run, k, (uint32_t)t, &run->temp_by_stack[k].dense[run->threads[t].cand[k].stack]);
	return 0;
}

static __attribute__((noinline)) int
on_free(struct mt_analysis_run *run, const struct mt_instance *in, const struct mt_event *ev)
{
	return free_event(run, in, ev);
}

static __attribute__((noinline)) int on_realloc(struct mt_analysis_run *run,
                                                const struct mt_instance *in,
                                                const struct mt_event *ev, uint32_t thread)
{
	return event_realloc(run, in, thread, ev->old, ev->addr, ev->size, ev->stack);
}

/* on_event's type dispatch, after what it does where that is rare. */
HOT int on_event_type(struct mt_analysis_run *run, const struct mt_instance *in,
                      const struct mt_event *ev, uint32_t thread)
{
	switch (ev->type) {
	case MT_REC_ALLOC:
		return on_alloc(run, in, ev, thread);
	case MT_REC_FREE:
		return on_free(run, in, ev);
	default: /* MT_REC_REALLOC */
		return on_realloc(run, in, ev, thread);
	}
}

/* on_event where it calls more than the event's own function (see event_first). */
static __attribute__((noinline)) int on_event_rare(struct mt_analysis_run *run,
                                                   const struct mt_instance *in,
                                                   const struct mt_event *ev, uint32_t thread)
{
	int r;

	if ((in != run->in || run->reach.scan.seen) && (r = event_first(run, in, ev, thread)) < 0)
		return r;
	tick_progress(run);
	return on_event_type(run, in, ev, thread);
}

/*
 * analyze_record for an event the replay hands over as it is: the same, without a record.
 * Its usual path calls nothing but the event's function, so that it saves no registers.
 */
static int on_event(void *ctx, const struct mt_instance *in, const struct mt_event *ev,
                    uint32_t thread)
{
	struct mt_analysis_run *run = ctx;

	if (in != run->in || run->reach.scan.seen || run->events_done + 1 >= run->next_progress)
		return on_event_rare(run, in, ev, thread);
	run->events_done++;
	return on_event_type(run, in, ev, thread);
}

/*
 * on_event of an ALLOC, then of the FREE of its block that came next (the replay applied both
 * first: nothing on_event reads of an allocation changed): one call for the two. Where both go
 * their usual way (alloc_event's and free_event's) and no thread before the ALLOC's has its
 * candidate at the address, the FREE finds the ALLOC's thread's candidate (candidate_scan): it is
 * counted a temporary at once, never kept (a candidate not pending is never read).
 */
static int on_pair(void *ctx, const struct mt_instance *in, const struct mt_event *alloc,
                   uint32_t alloc_thread, const struct mt_event *free_ev, uint32_t free_thread)
{
	struct mt_analysis_run *run = ctx;
	const enum mt_kind k = MT_KIND_HOST;
	uint64_t key = mt_block_key(alloc->fn, alloc->addr);
	uint32_t t;
	int r;

	if (in != run->in || run->reach.scan.seen || run->events_done + 2 >= run->next_progress) {
		if ((r = on_event(ctx, in, alloc, alloc_thread)) != 0)
			return r;
		return on_event(ctx, in, free_ev, free_thread);
	}
	run->events_done += 2;
	/* alloc_fast last: it notes the block where it says true */
	if (alloc->kind != k || alloc_thread >= run->nby_stream || !run->by_stream[alloc_thread] ||
	    use_maps(run) || !run->res->kind[k].histogram || !alloc->addr || free_ev->kind != k ||
	    free_ev->fn >= MT_FN_CUDA_MALLOC || free_ev->addr != key ||
	    !mt_diagnosis_free_quiet(&run->res->diag, in->last_free_size) ||
	    alloc->stack >= run->temp_by_stack[k].cap ||
	    candidate_before(run, k, key, t = run->by_stream[alloc_thread] - 1) ||
	    !mt_diagnosis_alloc_fast(&run->res->diag, in, alloc->addr, alloc->size)) {
		if ((r = alloc_event(run, in, alloc, alloc_thread)) != 0)
			return r;
		return free_event(run, in, free_ev);
	}
	run->res->kind[k].histogram[bucket_of(alloc->size)]++;
	run->threads[t].pending[k] = false;
	run->res->kind[k].temporary++;
	run->temp_by_stack[k].dense[alloc->stack]++;
	return 0;
}

static int on_before(void *ctx, const struct mt_instance *in, const struct mt_record *rec,
                     uint64_t time)
{
	struct mt_analysis_run *run = ctx;

	return run->hooks.before(run->hooks.record_ctx, run->a, in, rec, time);
}

/* ---- at the end of an instance ---- */

struct collect {
	struct mt_analysis_run *run;
	bool leaks; /* false after an exec */
};

/* What a classified stack that holds nothing leaked: no blocks of any class. */
static const struct mt_leak_count no_leak[MT_LEAK_CLASS_COUNT];

static int collect_row(void *ctx, const struct mt_stack_stats *s)
{
	struct collect *c = ctx;
	struct mt_kind_result *kr = &c->run->res->kind[s->kind];
	const struct mt_leak_count *split = NULL;
	struct mt_stack_row row = {
	        .stack = s->stack,
	        .stack_instance = s->stack_instance,
	        .allocations = s->allocations,
	        .bytes_allocated = s->bytes_allocated,
	        .peak_bytes = s->peak_bytes,
	        .peak_blocks = s->peak_blocks,
	};
	int ret;

	if ((ret = mt_diagnosis_add_stack(&c->run->res->diag, c->run->in, s)) < 0)
		return ret;
	if (c->leaks) {
		row.leaked_bytes = s->live_bytes;
		row.leaked_blocks = s->live_blocks;
		/* not classified: all of it unclassified, row.reach NULL */
		if (kr->classified &&
		    !(split = mt_reach_stack(&c->run->reach, s->stack_instance, s->stack)) &&
		    (row.leaked_bytes || row.leaked_blocks))
			row.reach = no_leak;
	}
	/* temporaries are only ever the instance's own allocations */
	if (s->stack_instance == c->run->in->id)
		row.temporary = mt_by_stack_get(&c->run->temp_by_stack[s->kind], s->stack);
	if (!row.allocations && !row.bytes_allocated && !row.peak_bytes && !row.leaked_bytes &&
	    !row.leaked_blocks && !row.temporary && !row.peak_blocks)
		return 0;
	/* capacity: 16, then doubled each time the count reaches a power of two */
	if (kr->nrows == 0 || (kr->nrows >= 16 && (kr->nrows & (kr->nrows - 1)) == 0)) {
		size_t cap = kr->nrows ? kr->nrows * 2 : 16;
		void *p = realloc(kr->rows, cap * sizeof(*kr->rows));
		if (!p)
			return -ENOMEM;
		kr->rows = p;
	}
	if (split) {
		/* room for every stack the scan classified: the rows point into it, it never moves
		 */
		if (!kr->reach &&
		    !(kr->reach = malloc((c->run->reach.by_stack.count + 1) * sizeof(*kr->reach))))
			return -ENOMEM;
		memcpy(kr->reach[kr->nreach], split, sizeof(kr->reach[0]));
		row.reach = kr->reach[kr->nreach++];
	}
	kr->rows[kr->nrows++] = row;
	return 0;
}

/* Each process's rows stay to the end: no room for more (collect_row doubles the room). */
static void rows_fit(struct mt_kind_result *kr)
{
	void *p;

	if (kr->nrows && (p = realloc(kr->rows, kr->nrows * sizeof(*kr->rows))))
		kr->rows = p;
}

static int on_instance_done(void *ctx, struct mt_replay *r, const struct mt_instance *in)
{
	struct mt_analysis_run *run = ctx;
	struct collect c = {.run = run, .leaks = !mt_end_replaced(in->end)};
	int ret;

	if (in != run->in && (ret = begin_instance(run, in)) < 0)
		return ret;
	run->res->reach = run->reach.scan;
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		struct mt_kind_result *kr = &run->res->kind[k];
		kr->stats = in->kind[k];
		if (c.leaks) {
			kr->leaked_bytes = in->kind[k].live_bytes;
			kr->leaked_blocks = in->kind[k].live_blocks;
			kr->leak_kinds[MT_LEAK_UNCLASSIFIED] =
			        (struct mt_leak_count){kr->leaked_bytes, kr->leaked_blocks};
		}
	}
	if (c.leaks && mt_reach_done(&run->reach.scan)) {
		struct mt_kind_result *kr = &run->res->kind[MT_KIND_HOST];
		if ((ret = mt_reach_finish(&run->reach, r, in)) < 0)
			goto out;
		kr->classified = true;
		memcpy(kr->leak_kinds, run->reach.total, sizeof(kr->leak_kinds));
	}
	ret = mt_replay_foreach_stack(r, in, collect_row, &c);
	for (int k = 0; k < MT_KIND_COUNT; k++)
		rows_fit(&run->res->kind[k]);
	if (ret == 0)
		ret = mt_diagnosis_finish(&run->res->diag, in, mt_replay_clock(r));
out:
	run_reset(run);
	run->in = NULL;
	return ret;
}

/* ---- the whole analysis ---- */

/*
 * A replay of fewer events is over before libc's debug file is read (2M
 * events take about 0.1 s, the file 77 ms on an idle core): the lookups
 * would open it themselves, and the thread's work and memory (8 MiB) would
 * be for nothing.
 */
#define PREFETCH_EVENTS (2u << 20)

/* The debug files worth reading while the replay runs (prefetch.h), on their thread; NULL:
 * none, or no thread. */
static struct mt_prefetch *prefetch(const struct mt_analysis *a)
{
	const struct mt_module **m;
	struct mt_prefetch *p = NULL;
	uint32_t total = 0, n = 0;

	for (uint32_t i = 0; i < a->nprocs; i++)
		total += a->procs[i].in->nmodules;
	if (!(m = calloc(total ? total : 1, sizeof(*m))))
		return NULL;
	for (uint32_t i = 0; i < a->nprocs; i++)
		for (uint32_t j = 0; j < a->procs[i].in->nmodules; j++)
			if (mt_prefetch_wanted(a->procs[i].in, &a->procs[i].in->modules[j]))
				m[n++] = &a->procs[i].in->modules[j];
	if (n)
		p = mt_prefetch_start(m, n);
	free(m);
	return p;
}

int mt_analysis_open(struct mt_analysis **out, const char *path,
                     const struct mt_analysis_hooks *hooks, struct mt_error *err)
{
	const struct mt_replay_callbacks cb = {
	        .record = on_record,
	        .instance_done = on_instance_done,
	        /* a call per record costs the other commands time: only when asked for */
	        .before = hooks && hooks->before ? on_before : NULL,
	        /* events without a record, unless a command looks at every record */
	        .event = hooks && hooks->record ? NULL : on_event,
	        .pair = on_pair,
	        .skip_definitions = true,
	};
	struct mt_analysis *a = calloc(1, sizeof(*a));
	struct mt_analysis_run run = {0};
	int r;

	*out = NULL;
	if (!a)
		return -ENOMEM;
	r = mt_reader_open(&a->trace, path, err);
	if (r < 0) {
		free(a);
		return r;
	}
	r = mt_replay_open(&a->replay, &a->trace, err);
	if (r < 0)
		goto fail;
	a->events = mt_replay_trace_stats(a->replay)->events;
	a->nprocs = mt_replay_instance_count(a->replay);
	a->procs = calloc(a->nprocs ? a->nprocs : 1, sizeof(*a->procs));
	if (!a->procs) {
		r = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < a->nprocs; i++)
		a->procs[i].in = mt_replay_instance(a->replay, i);
	/* the modules are known from here on: their debug files read while the replay runs */
	if (hooks && hooks->prefetch && a->events >= PREFETCH_EVENTS)
		a->prefetch = prefetch(a);
	run.a = a;
	if (hooks)
		run.hooks = *hooks;
	run.next_progress = PROGRESS_EVERY;
	mt_reach_init(&run.reach);
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		mt_map_init(&run.candidates[k], sizeof(struct candidate));
		mt_by_stack_init(&run.temp_by_stack[k]);
	}
	a->run = &run;
	r = mt_replay_run(a->replay, &cb, &run, err);
	a->run = NULL;
	run_reset(&run);
	free(run.threads);
	free(run.scratch);
	if (r < 0)
		goto fail;
	if (r > 0) {
		r = -EIO;
		goto fail;
	}
	{
		const struct mt_instance **ins = calloc(a->nprocs ? a->nprocs : 1, sizeof(*ins));
		if (!ins) {
			r = -ENOMEM;
			goto fail;
		}
		for (uint32_t i = 0; i < a->nprocs; i++)
			ins[i] = a->procs[i].in;
		r = mt_diagnosis_tree(&a->tree, ins, a->nprocs, mt_replay_clock(a->replay));
		free(ins);
		if (r < 0)
			goto fail;
	}
	*out = a;
	return 0;
fail:
	if (r == -ENOMEM && err && !err->message[0]) {
		err->offset = 0;
		strcpy(err->message, "out of memory");
	}
	mt_analysis_free(a);
	return r;
}

void mt_analysis_free(struct mt_analysis *a)
{
	if (!a)
		return;
	for (uint32_t i = 0; a->procs && i < a->nprocs; i++) {
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			free(a->procs[i].kind[k].rows);
			free(a->procs[i].kind[k].stack_rows);
			free(a->procs[i].kind[k].reach);
			free(a->procs[i].kind[k].fails);
			free(a->procs[i].kind[k].histogram);
		}
		mt_diagnosis_free(&a->procs[i].diag);
	}
	free(a->procs);
	mt_groups_free(a->groups);
	mt_frames_free(a->frames);
	if (a->prefetch) /* no frames were asked for: a->sym is NULL */
		a->sym = mt_prefetch_take(a->prefetch);
	if (a->sym)
		mt_symbolizer_free(a->sym);
	mt_replay_free(a->replay);
	mt_reader_close(&a->trace);
	free(a);
}

/* ---- frames ---- */

int mt_analysis_frames(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                       struct mt_sym *out, unsigned max)
{
	if (a->groups)
		return mt_analysis_group_frames(a, stack_instance, stack, out, max);
	return mt_analysis_native_frames(a, stack_instance, stack, out, max);
}
