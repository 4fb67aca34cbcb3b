/* SPDX-License-Identifier: MIT */
/*
 * A trace as Trace Event JSON (the Chrome trace format), what `memtrace
 * export --format chrome-trace` writes for Perfetto's UI and
 * chrome://tracing (docs/export.md): per process, a counter of live bytes
 * for each memory kind, one of RSS from the sampler's samples, and instant
 * events for marks, failed allocations, an exec'd program's start and the
 * end.
 *
 * Counters are written while the trace is replayed, through the analysis's
 * `before` hook (analysis.h), which sees the live bytes after every change:
 * memory does not grow with events. A process's life is cut into
 * MT_CHROME_INTERVALS equal intervals and each kind writes at most three
 * points in each: the first change, the highest value (at its moment) and
 * the value it ends with, so the peak keeps its height and time and the
 * file its size, whatever the number of events. A process with no more
 * than 3 * MT_CHROME_INTERVALS events has every change written.
 *
 * May not: compute figures (the replay and analysis.c do), print.
 * Errors are negative errno.
 */
#ifndef MEMTRACE_ANALYZER_CHROME_TRACE_H
#define MEMTRACE_ANALYZER_CHROME_TRACE_H

#include <stdio.h>

#include "analysis.h"

#define MT_CHROME_INTERVALS 10000

struct mt_chrome_trace;

/* Writes to f (which the caller closes); `source` names the trace in the file. */
int mt_chrome_trace_new(struct mt_chrome_trace **out, FILE *f, const char *source);
/* The analysis's `before` hook (struct mt_analysis_hooks), with the writer as record_ctx. */
int mt_chrome_trace_before(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
                           const struct mt_record *rec, uint64_t time);
/* After the analysis: the last counters, the other events, the end of the file. */
int mt_chrome_trace_finish(struct mt_chrome_trace *t, struct mt_analysis *a);
void mt_chrome_trace_free(struct mt_chrome_trace *t);

#endif
