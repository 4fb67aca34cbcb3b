/* SPDX-License-Identifier: MIT */
/*
 * Leak classes (docs/reachability.md): which class the exit's scan gave
 * each malloc block a process left live, from its REACH and REACH_BLOCKS
 * records, and why a process or a memory kind has none.
 *
 * A block live at the end is in the class a REACH_BLOCKS record names at
 * its address, unless it was allocated after the scan (a destructor that
 * ran later; its address may be a scanned block's that was freed since):
 * then, and when no record names it, it is unclassified.
 *
 * Memory grows with the blocks the scan named and the stacks that hold
 * live blocks, one process at a time. May not: print.
 */
#ifndef MEMTRACE_ANALYZER_REACH_H
#define MEMTRACE_ANALYZER_REACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "map.h"
#include "reader.h"
#include "replay.h"

/* memcheck's four classes, and what no scan judged. */
enum mt_leak_class {
	MT_LEAK_DEFINITE,
	MT_LEAK_INDIRECT,
	MT_LEAK_POSSIBLE,
	MT_LEAK_REACHABLE,
	MT_LEAK_UNCLASSIFIED,
	MT_LEAK_CLASS_COUNT
};

struct mt_leak_count {
	uint64_t bytes, blocks;
};

/* "definite", "indirect", "possible", "reachable", "unclassified". */
const char *mt_leak_class_name(enum mt_leak_class c);

/* A process's REACH record. */
struct mt_reach_scan {
	bool seen;
	uint64_t time;   /* ticks */
	uint64_t status; /* enum mt_reach_status */
	uint64_t detail, blocks, bytes, scanned, ns, chunks;
};

/* A scan ran and classified the process's host blocks. */
static inline bool mt_reach_done(const struct mt_reach_scan *s)
{
	return s->seen && s->status == MT_REACH_DONE;
}

/* One process's classes, while it is replayed. */
struct mt_reach {
	struct mt_reach_scan scan;
	struct mt_map classes;  /* host block address -> uint8_t enum mt_reach_class */
	struct mt_map by_stack; /* stack_instance << 32 | stack -> struct mt_leak_count[] */
	struct mt_leak_count total[MT_LEAK_CLASS_COUNT];
};

void mt_reach_init(struct mt_reach *r);
void mt_reach_free(struct mt_reach *r);
/*
 * A record of the process in replay order: REACH, REACH_BLOCKS, and a host
 * allocation after the scan (its address is no longer the scanned block's).
 * Others are ignored. -ENOMEM.
 */
int mt_reach_note(struct mt_reach *r, const struct mt_record *rec);
/* Classifies the host blocks live at the process's end (its instance_done); -ENOMEM. */
int mt_reach_finish(struct mt_reach *r, struct mt_replay *rp, const struct mt_instance *in);
/* A stack's live host blocks by class after mt_reach_finish; NULL when it holds none. */
const struct mt_leak_count *mt_reach_stack(const struct mt_reach *r, uint32_t stack_instance,
                                           uint32_t stack);

/*
 * Why the live blocks of kind k of a process are not classified, as a short
 * phrase ("killed", "turned off (MEMTRACE_REACHABILITY=0)", ...), written
 * in buf; NULL when they are.
 */
const char *mt_reach_missing(const struct mt_instance *in, const struct mt_reach_scan *s,
                             enum mt_kind k, char *buf, size_t size);

#endif
