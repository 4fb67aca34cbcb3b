/* SPDX-License-Identifier: MIT */
/*
 * What each stack kept between two marks of a process: its live bytes at
 * the first mark named `to` after the first mark named `from`, less those at
 * that mark; the stacks that grew, per memory kind. `memtrace check
 * --from-mark A --to-mark B` gates on it, and the pytest plugin with it
 * (docs/pytest.md): no scan runs at a mark, so the figures are unclassified.
 *
 * Runs on the analysis's record hook (analysis.h). May not: print.
 */
#ifndef MEMTRACE_ANALYZER_WINDOW_H
#define MEMTRACE_ANALYZER_WINDOW_H

#include "analysis.h"

/* One process instance that made the from-mark. */
struct mt_window_proc {
	uint32_t instance;
	bool closed; /* the to-mark came: rows are complete */
	uint64_t from_time, to_time;
	struct mt_map at_from[MT_KIND_COUNT]; /* stack key -> live figures at the from-mark */
	/* after the to-mark: per kind, the stacks that grew (leaked_* = what each kept) */
	struct mt_stack_row *rows[MT_KIND_COUNT];
	size_t nrows[MT_KIND_COUNT];
};

struct mt_window {
	const char *from, *to; /* the marks' labels; must outlive the window */
	struct mt_window_proc *procs;
	uint32_t nprocs;
};

/* An mt_analysis_hooks record hook; ctx is a struct mt_window. */
int mt_window_record(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
                     const struct mt_record *rec);
/* The window of an instance, or NULL when it made no from-mark. */
const struct mt_window_proc *mt_window_find(const struct mt_window *w, uint32_t instance);
void mt_window_free(struct mt_window *w);

#endif
