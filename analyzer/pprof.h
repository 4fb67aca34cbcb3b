/* SPDX-License-Identifier: MIT */
/*
 * A trace's analysis as a pprof profile (github.com/google/pprof,
 * proto/profile.proto), what `memtrace export --format pprof` writes
 * (docs/export.md): one sample per stack (a group's for a Python program,
 * as the report shows them) and process, with the values alloc_objects,
 * alloc_space, inuse_objects and inuse_space of one memory kind, labelled
 * with the process's pid and command. Each process's values add up to the
 * report's figures; a part of a figure with no stack is a sample of its
 * own, `[no stack]`.
 *
 * May not: print, compute figures (analysis.c does).
 */
#ifndef MEMTRACE_ANALYZER_PPROF_H
#define MEMTRACE_ANALYZER_PPROF_H

#include <stdbool.h>
#include <stdio.h>

#include "analysis.h"
#include "protobuf.h"

/* What "in use" means: bytes live at each process's peak of the kind, or at its end. */
enum mt_pprof_inuse {
	MT_PPROF_AT_PEAK,
	MT_PPROF_AT_END, /* the report's leaked figures: 0 for a process replaced by exec */
};

/* The profile, uncompressed, appended to out; negative errno. */
int mt_pprof_build(struct mt_analysis *a, enum mt_kind kind, enum mt_pprof_inuse at,
                   struct mt_pb *out);
/* n bytes to f, gzipped (pprof reads profiles gzipped); negative errno. */
int mt_pprof_gzip(FILE *f, const void *data, size_t n);

#endif
