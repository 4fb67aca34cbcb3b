/* SPDX-License-Identifier: MIT */
/*
 * Memory over time, for `memtrace view`, gathered from the analysis's
 * record hook (analysis.h) while the trace is replayed.
 *
 * Per process instance: each memory kind's live bytes over the instance's
 * life in MT_TIMELINE_BUCKETS equal intervals, each holding the highest
 * value reached in it (so the peak is never averaged away, and a plot of
 * the buckets shows it at its true height); and snapshots of the live set
 * by stack, each kind's largest MT_SNAPSHOT_STACKS stacks with the rest
 * summed, at evenly spaced moments (one per MT_EVENTS_PER_SNAPSHOT events
 * of the instance, no more than MT_SNAPSHOT_WALK stacks walked in all, 4 to
 * MT_SNAPSHOTS_EVEN), at every MARK and at
 * every failed allocation (MT_SNAPSHOTS_MAX in all), so that a moment on
 * the timeline can be shown as a flame graph. An evenly spaced one is taken
 * just before the first event at or after its moment, so it is the live set
 * at that moment exactly, and it holds until that event. And before the
 * event that ends a stretch of 1/MT_QUIET_FRACTION of the instance's life
 * or more without one, the live set of that whole stretch: whatever the
 * number of events, a click anywhere in such a stretch shows exactly what
 * was live there.
 *
 * The work per event is O(1); a snapshot costs one walk over the
 * instance's stacks. Memory does not grow with events.
 *
 * May not: print, symbolize. Errors are negative errno.
 */
#ifndef MEMTRACE_ANALYZER_TIMELINE_H
#define MEMTRACE_ANALYZER_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis.h"

#define MT_TIMELINE_BUCKETS    1000
#define MT_SNAPSHOTS_EVEN      100
#define MT_EVENTS_PER_SNAPSHOT 16
#define MT_SNAPSHOT_WALK       30000000
#define MT_SNAPSHOTS_MAX       300
#define MT_QUIET_FRACTION      100
#define MT_SNAPSHOT_STACKS     200

enum mt_snapshot_why {
	MT_SNAPSHOT_TIME, /* an evenly spaced moment, or a stretch without events */
	MT_SNAPSHOT_MARK, /* a MARK record */
	MT_SNAPSHOT_FAIL, /* a failed allocation */
};

struct mt_snapshot_row {
	uint32_t stack, stack_instance;
	uint64_t bytes, blocks;
};

/* One kind's live set at a snapshot: the largest stacks and what the rest add up to. */
struct mt_snapshot_kind {
	struct mt_snapshot_row *rows; /* largest first */
	uint32_t nrows;
	uint32_t rest_stacks;
	uint64_t rest_bytes, rest_blocks;
};

struct mt_snapshot {
	uint64_t time;  /* ticks: the moment (a MARK's or a FAIL's: just after it) */
	uint64_t until; /* ticks: the live set is the same from time to until */
	enum mt_snapshot_why why;
	struct mt_snapshot_kind kind[MT_KIND_COUNT];
};

struct mt_timeline_proc {
	const struct mt_instance *in; /* NULL: the instance had no records */
	uint64_t start, width;        /* ticks: the first bucket's start, each bucket's width */
	uint32_t nbuckets;
	uint64_t *live[MT_KIND_COUNT];  /* highest live bytes per bucket; NULL: never live */
	uint64_t last[MT_KIND_COUNT];   /* live bytes now */
	uint32_t filled[MT_KIND_COUNT]; /* buckets of live[k] written so far */
	struct mt_snapshot *snaps;
	uint32_t nsnaps;
	uint32_t neven;     /* evenly spaced snapshots to take */
	uint32_t next_even; /* the next one, 1..neven */
	bool had_event;     /* an event was seen; the time of the last: */
	uint64_t last_event;
};

struct mt_timeline {
	struct mt_timeline_proc *procs; /* by instance index */
	uint32_t nprocs;
};

/* The analysis hooks (struct mt_analysis_hooks); ctx is a zeroed struct mt_timeline. */
int mt_timeline_record(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
                       const struct mt_record *rec);
int mt_timeline_before(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
                       const struct mt_record *rec, uint64_t time);
/* After the analysis: every bucket written up to each instance's end, snapshots in time order. */
void mt_timeline_finish(struct mt_timeline *t);
void mt_timeline_free(struct mt_timeline *t);

/* ns since the instance's start of bucket b's start. */
uint64_t mt_timeline_bucket_ns(const struct mt_analysis *a, const struct mt_timeline_proc *p,
                               uint32_t b);

#endif
