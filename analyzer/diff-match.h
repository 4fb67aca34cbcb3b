/* SPDX-License-Identifier: MIT */
/*
 * The matching behind `memtrace diff` (docs/diff.md): the stacks of two
 * analyses of the same program, BASE and NEW, paired by what their frames
 * say, never by addresses, which move between builds.
 *
 * A process is known by its program, the base name of its executable;
 * the processes of one program in a trace are summed. Within a program and
 * memory kind, a stack (a group's, for a Python program, as the report
 * shows them) is known by its frames outermost to innermost, each by its
 * function and the base name of its file; a frame without symbols by its
 * module's base name and offset (the same build only); a group's innermost
 * Python frame also by the native label folded into it. Line numbers are
 * part of a Python frame's name, of every frame's or of none (enum
 * mt_diff_lines). Stacks of one trace that are named alike are summed.
 *
 * Each figure of a program and kind is the report's summed over its
 * processes: the peak (each process's own), the bytes leaked as `check`
 * counts them (the classes in `counted`), the bytes allocated, the
 * allocations; a part of a figure with no stack is a stack of its own
 * (`[no stack]`), so a kind's stacks add up to its figures.
 *
 * May not: print, compute figures (analysis.c does). Errors are negative
 * errno.
 */
#ifndef MEMTRACE_ANALYZER_DIFF_MATCH_H
#define MEMTRACE_ANALYZER_DIFF_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis.h"

enum mt_diff_lines {
	MT_DIFF_LINES_PYTHON, /* a Python frame's line is part of its name, a native one's not */
	MT_DIFF_LINES_ALL,
	MT_DIFF_LINES_NONE,
};

enum { MT_DIFF_BASE, MT_DIFF_NEW };

struct mt_diff_figures {
	uint64_t peak_bytes, leaked_bytes, bytes_allocated, allocations;
};

struct mt_diff_stack {
	struct mt_diff_figures side[2]; /* by MT_DIFF_BASE, MT_DIFF_NEW */
	bool in[2];                     /* whether the trace has the stack */
	/* the stack shown: NEW's when both have it; a NULL analysis for `[no stack]` */
	struct mt_analysis *a;
	uint32_t stack_instance, stack;
};

/* One program and memory kind. */
struct mt_diff_group {
	char *program;
	enum mt_kind kind;
	struct mt_diff_figures total[2];
	uint32_t processes[2]; /* the program's processes that show the kind, per trace */
	struct mt_diff_stack *stacks;
	size_t nstacks;
};

struct mt_diff {
	struct mt_diff_group *groups; /* by program, then kind */
	size_t ngroups;
};

/*
 * Matches the stacks of base and new (both must outlive d); counted says
 * which leak classes make the leaked bytes.
 */
int mt_diff_build(struct mt_diff *d, struct mt_analysis *base, struct mt_analysis *new_,
                  enum mt_diff_lines lines, const bool counted[MT_LEAK_CLASS_COUNT]);
void mt_diff_free(struct mt_diff *d);

#endif
