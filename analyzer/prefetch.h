/* SPDX-License-Identifier: MIT */
/*
 * The debug information of a trace's modules, read on an idle core while
 * the replay runs (prefetch.c).
 */
#ifndef MEMTRACE_ANALYZER_PREFETCH_H
#define MEMTRACE_ANALYZER_PREFETCH_H

#include "replay.h"
#include "symbolize.h"

struct mt_prefetch;

/*
 * Whether a module of the instance is worth opening before it is asked
 * for: it has a debug file of its build-id (mt_symbolizer_debug_file) and
 * a frame of the instance's stacks lies in its code. The others are opened
 * by a lookup, if one comes: in bench-small's trace, the libm and
 * libpthread of perf, which started it, have debug files and no frame.
 */
bool mt_prefetch_wanted(const struct mt_instance *in, const struct mt_module *m);
/*
 * Opens the n modules, in a symbolizer of its own on a thread of the
 * lowest priority (mt_symbolizer_prepare). They are copied: the caller's
 * may change or go. NULL when no thread could be made.
 */
struct mt_prefetch *mt_prefetch_start(const struct mt_module *const *m, uint32_t n);
/* Whether the thread is done: mt_prefetch_take would give its symbolizer. */
bool mt_prefetch_done(struct mt_prefetch *p);
/*
 * Ends p (NULL: nothing): its symbolizer if the thread is done, the
 * caller's from then on; else NULL, and the thread stops after the module
 * at hand and frees what it made, without being waited for.
 */
struct mt_symbolizer *mt_prefetch_take(struct mt_prefetch *p);

#endif
