/* SPDX-License-Identifier: MIT */
/*
 * The data of `memtrace view`'s page, as one JSON object (docs/viewer.md):
 * the report (report-json.h) so that the page shows the report's own
 * figures, the stacks as a tree of frames shared by every flame graph, and
 * per process the timeline, the sampler's series, the flame graphs of the
 * peak, the leaks, all allocations and the temporary ones, and the live set
 * at each snapshot (timeline.h).
 *
 * What does not fit a page a person can attach to a bug report is cut, and
 * the cut is said in the data: a flame graph weighs every stack, and merges
 * the nodes under 1/MT_VIEW_FLAME_MIN_SHARE of its total into one node per
 * parent; the timelines are MT_TIMELINE_BUCKETS intervals, each with its
 * highest value.
 *
 * May not: print, compute figures the analysis has.
 */
#ifndef MEMTRACE_ANALYZER_VIEW_DATA_H
#define MEMTRACE_ANALYZER_VIEW_DATA_H

#include <jansson.h>

#include "analysis.h"
#include "timeline.h"

/* A flame graph's nodes under 1/1000 of its total (0.1%) are merged per parent. */
#define MT_VIEW_FLAME_MIN_SHARE 1000
#define MT_VIEW_FLAME_MIN_TEXT  "0.1%"

/* The page's data; NULL without memory. `top` is the report's stacks per list. */
json_t *mt_view_data(struct mt_analysis *a, const struct mt_timeline *t, const char *file,
                     unsigned top);

#endif
