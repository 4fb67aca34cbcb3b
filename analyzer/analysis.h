/* SPDX-License-Identifier: MIT */
/*
 * The analysis that `memtrace report`, `flamegraph` and `check` share: one
 * replay of a trace (replay.h) that keeps, per process instance and memory
 * kind, the totals, the peak, the leaks, the temporary allocations, a size
 * histogram and the failed allocations, each by stack; and the frames of a
 * stack as a person reads them (symbolized, allocator frames dropped);
 * and per instance the diagnosis (diagnosis.h), with the tree's combined
 * peak over all of them.
 *
 * Memory grows with distinct stacks and live blocks, never with events: the
 * per-event work is a few counters and, for temporaries, one lookup in a
 * table with one entry per thread. Stacks are symbolized only when a
 * command asks for their frames.
 *
 * May not: print (progress goes through a callback). Errors are negative
 * errno with struct mt_error.
 */
#ifndef MEMTRACE_ANALYZER_ANALYSIS_H
#define MEMTRACE_ANALYZER_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diagnosis.h"
#include "map.h"
#include "reach.h"
#include "reader.h"
#include "replay.h"
#include "symbolize.h"

/* What a stack is ranked or a flame graph is weighed by. */
enum mt_metric {
	MT_METRIC_PEAK,        /* bytes live at the kind's peak */
	MT_METRIC_LEAKED,      /* bytes live at the end (at death for a killed process) */
	MT_METRIC_ALLOCATED,   /* bytes allocated in total */
	MT_METRIC_ALLOCATIONS, /* number of allocations */
	MT_METRIC_TEMPORARY,   /* number of temporary allocations */
	MT_METRIC_COUNT
};

/*
 * Size histogram: bucket 0 holds size 0, bucket b (1..64) the sizes in
 * [2^(b-1), 2^b).
 */
#define MT_HISTOGRAM_BUCKETS 65

/* Failed allocations kept in detail per instance and kind; all are counted. */
#define MT_ANALYSIS_MAX_FAILS 32
/* Stacks kept for each of them: the ones holding the most memory then. */
#define MT_FAIL_TOP_STACKS 5

/* A stack: its id in the stack table of instance stack_instance. */
struct mt_stack_ref {
	uint32_t stack_instance, stack;
};

/*
 * One stack's figures within an instance and kind; after mt_analysis_group,
 * a group's: the sums over the stacks merged in it, and stack is the
 * group's representative.
 */
struct mt_stack_row {
	uint32_t stack;
	uint32_t stack_instance; /* whose stack table `stack` is in (a parent's, for inherited
	                            blocks) */
	uint64_t allocations;
	uint64_t bytes_allocated;
	uint64_t peak_bytes, peak_blocks;     /* at the kind's peak */
	uint64_t leaked_bytes, leaked_blocks; /* live at the end; 0 after an exec */
	/*
	 * The leaked blocks by class (reach.h), MT_LEAK_CLASS_COUNT of them
	 * (mt_stack_row_reach reads them), or NULL: all unclassified (a kind
	 * not classified, or nothing leaked), as most rows' are. Out of line,
	 * the classes cost only the stacks the exit's scan classified (a torch
	 * report's 702,316 rows: 107 -> 59 MiB).
	 */
	const struct mt_leak_count *reach;
	uint64_t temporary;
	const struct mt_stack_ref *merged; /* a group's stacks, in order; NULL for a stack */
	uint32_t nmerged;
};

/* A row's leaked blocks of class c. */
static inline struct mt_leak_count mt_stack_row_reach(const struct mt_stack_row *row,
                                                      enum mt_leak_class c)
{
	if (row->reach)
		return row->reach[c];
	if (c == MT_LEAK_UNCLASSIFIED)
		return (struct mt_leak_count){row->leaked_bytes, row->leaked_blocks};
	return (struct mt_leak_count){0, 0};
}

/* A failed allocation and the memory of its kind at that moment. */
struct mt_fail_snapshot {
	struct mt_fail_event event;
	uint64_t live_bytes, live_blocks;
	/* the last sample before it (host kinds): the heap's free bytes and RSS then */
	bool have_sample_before;
	uint64_t heap_free_before, rss_before;
	uint32_t ntop;
	struct mt_stack_row top[MT_FAIL_TOP_STACKS]; /* leaked_* hold the bytes live then */
};

struct mt_kind_result {
	struct mt_kind_stats stats; /* the replay's figures (replay.h) */
	uint64_t temporary;
	/*
	 * Live at the end, for a process that exited or was killed ("live at
	 * death"). After an exec the kernel dropped the whole heap: nothing
	 * leaked, and stats.live_* still say what was live then.
	 */
	uint64_t leaked_bytes, leaked_blocks;
	/* the exit's scan classified them (host blocks of a process it ran in): the split */
	bool classified;
	struct mt_leak_count leak_kinds[MT_LEAK_CLASS_COUNT];
	/* MT_HISTOGRAM_BUCKETS counts, made by the first allocation: most of the kinds of
	 * most processes have none */
	uint64_t *histogram;
	struct mt_stack_row *rows; /* every stack with a non-zero figure, in no order */
	size_t nrows;
	/* the rows' reach (and the stack_rows'), room for every stack the exit's scan classified */
	struct mt_leak_count (*reach)[MT_LEAK_CLASS_COUNT];
	size_t nreach;
	/* after mt_analysis_group, rows are the groups' and these the stacks' */
	struct mt_stack_row *stack_rows;
	size_t nstack_rows;
	struct mt_fail_snapshot *fails; /* the first MT_ANALYSIS_MAX_FAILS */
	uint32_t nfails;
};

struct mt_process_result {
	const struct mt_instance *in;
	struct mt_kind_result kind[MT_KIND_COUNT];
	struct mt_diagnosis diag;   /* growth, the sampler's series, findings, post-mortem */
	struct mt_reach_scan reach; /* the exit's reachability scan */
};

struct mt_analysis_run;
struct mt_frames;
struct mt_groups;

struct mt_analysis {
	struct mt_trace trace;
	struct mt_replay *replay;
	struct mt_symbolizer *sym;       /* made on the first mt_analysis_frames() */
	struct mt_prefetch *prefetch;    /* gives sym, if done, when frames are first asked for */
	struct mt_process_result *procs; /* in instance order */
	uint32_t nprocs;
	uint64_t events;             /* events in the file */
	struct mt_tree tree;         /* the process tree's combined RSS and Pss */
	struct mt_analysis_run *run; /* while replaying */
	struct mt_groups *groups;    /* after mt_analysis_group */
	struct mt_frames *frames;    /* every frame shown, each once (frames.h), made on use */
};

/* What a command may add to the replay; every member may be NULL. */
struct mt_analysis_hooks {
	/* Called every 2^20 events while replaying: events done, of `total`. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	/*
	 * Every record of every instance in replay order but the stacks'
	 * definitions (STACK, PYSTACK, PYCODE: replay.h's skip_definitions),
	 * after the analysis has applied it: the replay's figures (in->kind[],
	 * the per-stack ones through mt_replay_foreach_stack) are those just
	 * after the record.
	 * Non-zero stops the analysis; a negative errno is returned by it.
	 */
	int (*record)(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
	              const struct mt_record *rec);
	/* Before each record is applied (replay.h), with record_ctx: the figures are then
	 * those of every moment before `time`. */
	int (*before)(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
	              const struct mt_record *rec, uint64_t time);
	void *record_ctx;
	/* The modules' debug information opened on a second core while replaying, for a
	 * command that prints frames (prefetch.h). */
	bool prefetch;
};

/* Reads and replays the trace at path; *out is NULL on error. */
int mt_analysis_open(struct mt_analysis **out, const char *path,
                     const struct mt_analysis_hooks *hooks, struct mt_error *err);
void mt_analysis_free(struct mt_analysis *a);

uint64_t mt_stack_row_value(const struct mt_stack_row *row, enum mt_metric m);
/* The kind's figure for a metric: what the rows' values add up to. */
uint64_t mt_kind_result_total(const struct mt_kind_result *k, enum mt_metric m);
/*
 * Sorts rows by a metric, largest first (ties by stack id, so output is
 * stable). Leaks rank by what `check` counts first (definite, indirect and
 * unclassified bytes), then possible, then reachable bytes.
 */
void mt_stack_rows_sort(struct mt_stack_row *rows, size_t n, enum mt_metric m);

/* "peak", "leaked", ...; parse returns -EINVAL for an unknown name. */
const char *mt_metric_name(enum mt_metric m);
int mt_metric_parse(const char *name);

/*
 * The frames of a stack as a person reads them, innermost first: every
 * return address symbolized (inlined calls expanded), frames in
 * libmemtrace.so left out, and the leading frames of the allocator itself
 * (C++ operator new and new[] in all their variants) dropped, so the first
 * frame is the code that asked for memory. Returns the number written (0
 * for an unknown stack) or a negative errno. A frame that cannot be
 * symbolized has only address (and module, offset when known).
 */
int mt_analysis_native_frames(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                              struct mt_sym *out, unsigned max);

/*
 * Grouping by the Python stack (group.c, docs/python.md): in a stack with
 * Python frames, the frames from the innermost Python frame outwards and
 * the label (label.h, with the user's plumbing patterns) of the native
 * frames inside it make its group; the group's frames are those outer
 * frames, the innermost with the label as its `tail`. Stacks without a
 * Python frame are in no group; nor are the native frames outside the
 * outermost Python frame (the interpreter's main) in a group's frames.
 *
 * mt_analysis_group replaces every kind's rows by the groups' (a stack in
 * no group keeps its row), keeping the stacks' in stack_rows, and merges
 * the growth of a group's stacks; from then on mt_analysis_frames gives a
 * stack's group's frames. plumbing (may be NULL) must outlive the analysis.
 */
int mt_analysis_group(struct mt_analysis *a, const char *plumbing);
/*
 * Rows of the stacks grouped (after mt_analysis_group): each group's sums
 * with its stacks in merged; *out (one block, freed with free()) holds
 * *nout rows in no order.
 */
int mt_analysis_group_rows(struct mt_analysis *a, const struct mt_stack_row *rows, size_t n,
                           struct mt_stack_row **out, size_t *nout);
/*
 * Frees the stacks' rows mt_analysis_group kept (stack_rows), for a command
 * that reads only the groups': 110 MB of an import torch trace's report.
 */
void mt_analysis_drop_stack_rows(struct mt_analysis *a);
/* A stack's group's frames, or its native frames when it is in none. */
int mt_analysis_group_frames(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                             struct mt_sym *out, unsigned max);
void mt_groups_free(struct mt_groups *g);
/* A stack's group's representative in place of the stack, when it is in a group. */
int mt_analysis_representative(struct mt_analysis *a, uint32_t *stack_instance, uint32_t *stack);
/* Whether a stack of the trace is in a group: some process has Python frames. */
bool mt_analysis_has_groups(const struct mt_analysis *a);

/*
 * The frames a command shows: the group's after mt_analysis_group, the
 * native frames otherwise.
 */
int mt_analysis_frames(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                       struct mt_sym *out, unsigned max);

/* ns from an instance's start to `ticks`, 0 for ticks 0. */
uint64_t mt_analysis_since_start(const struct mt_analysis *a, const struct mt_instance *in,
                                 uint64_t ticks);

#endif
