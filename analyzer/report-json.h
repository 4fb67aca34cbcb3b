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
struct mt_sym;

/* The whole report, with `top` stacks per list; NULL without memory. */
json_t *mt_report_json(struct mt_analysis *a, const char *file, unsigned top);
/*
 * A stack's frames as the report's STACK has them (docs/json-report.md),
 * left in syms too (room for 512, as every command keeps): *count of them,
 * <= 0 for none.
 */
json_t *mt_json_frames(struct mt_analysis *a, struct mt_sym *syms, uint32_t si, uint32_t stack,
                       int *count);
/* jansson integers are signed 64-bit: a larger value becomes a real. */
json_t *mt_json_u64(uint64_t v);

#endif
