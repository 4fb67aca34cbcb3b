/* SPDX-License-Identifier: MIT */
/*
 * The report as JSON (docs/json-report.md): what `memtrace report --json`
 * prints and what `memtrace view` shows.
 */
#ifndef MEMTRACE_ANALYZER_REPORT_JSON_H
#define MEMTRACE_ANALYZER_REPORT_JSON_H

#include <jansson.h>
#include <stdint.h>

struct mt_analysis;

/* The whole report, with `top` stacks per list; NULL without memory. */
json_t *mt_report_json(struct mt_analysis *a, const char *file, unsigned top);
/* jansson integers are signed 64-bit: a larger value becomes a real. */
json_t *mt_json_u64(uint64_t v);

#endif
