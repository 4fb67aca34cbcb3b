/* SPDX-License-Identifier: MIT */
/*
 * Several traces side by side, one per rank of a multi-process job
 * (`memtrace report A B C...`, docs/ranks.md): each trace's root process
 * (the rank's own) with its peak per memory kind and how it ended, the
 * first trouble of each trace (a failed allocation, or a process killed)
 * on the wall clock, and every stack that held memory at a peak, matched
 * across the traces by its frames, with its bytes at each trace's peak.
 *
 * A trace is added once its analysis is done, then freed: memory grows
 * with the stacks, not with the traces' size. May not: print.
 */
#ifndef MEMTRACE_ANALYZER_RANKS_H
#define MEMTRACE_ANALYZER_RANKS_H

#include "analysis.h"

/* The earliest failed allocation or killed process of a trace. */
struct mt_rank_trouble {
	bool any;
	bool killed;          /* else a failed allocation */
	uint64_t realtime_ns; /* when, on the wall clock (ns since the epoch) */
	uint32_t pid;
	const char *command; /* that process's; the rank's analysis is gone, so a copy */
	uint64_t live_bytes; /* killed: host bytes live at death; failed: of its kind then */
	struct mt_fail_event fail;
};

struct mt_rank {
	const char *file;
	char *command;
	uint32_t pid, processes;
	enum mt_end end;
	uint32_t exit_status;
	uint64_t start_realtime_ns;
	uint64_t sampling;
	struct mt_kind_stats kind[MT_KIND_COUNT]; /* the root process's */
	bool shown[MT_KIND_COUNT];
	uint64_t failed[MT_KIND_COUNT]; /* failed allocations of every process of the trace */
	struct mt_rank_trouble trouble;
};

/* A stack matched across the traces by its frames. */
struct mt_rank_stack {
	enum mt_kind kind;
	char *key;       /* its frames, a line each */
	char *label;     /* mt_cmd_label_text */
	uint64_t *peak;  /* bytes it held at each trace's peak of the kind, 0 where it held none */
	uint64_t spread; /* the largest less the smallest */
};

struct mt_ranks {
	struct mt_rank *rank;
	uint32_t n, cap;
	struct mt_rank_stack *stacks;
	size_t nstacks;
	struct mt_map index; /* hash of (kind, key) -> stacks index + 1 */
};

/* For up to cap traces; -ENOMEM. */
int mt_ranks_init(struct mt_ranks *r, uint32_t cap);
/* The figures of one analysed trace, as the next rank (its analysis may be freed after). */
int mt_ranks_add(struct mt_ranks *r, struct mt_analysis *a, const char *file);
/* Sorts the stacks by spread, largest first (after the last add). */
void mt_ranks_finish(struct mt_ranks *r);
void mt_ranks_free(struct mt_ranks *r);
/* The traces with trouble, earliest first, into order (r->n entries); their count. */
uint32_t mt_ranks_trouble_order(const struct mt_ranks *r, uint32_t *order);
/* The earliest start of the traces' root processes (ns since the epoch). */
uint64_t mt_ranks_start(const struct mt_ranks *r);

#endif
