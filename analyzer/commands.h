/* SPDX-License-Identifier: MIT */
/*
 * The memtrace commands. Each takes the arguments after its name and
 * returns the process exit status: 0 ok, 1 usage, 2 unreadable trace
 * (run returns the traced program's status). Only this layer prints.
 */
#ifndef MEMTRACE_ANALYZER_COMMANDS_H
#define MEMTRACE_ANALYZER_COMMANDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis.h"
#include "escape.h"

#define MT_EXIT_OK        0
#define MT_EXIT_USAGE     1
#define MT_EXIT_BAD_TRACE 2

int mt_cmd_dump(int argc, char **argv);
int mt_cmd_run(int argc, char **argv);
int mt_cmd_report(int argc, char **argv);
int mt_cmd_flamegraph(int argc, char **argv);
int mt_cmd_check(int argc, char **argv);
int mt_cmd_view(int argc, char **argv);
/* `memtrace report` of several traces, side by side (report-ranks.c). */
int mt_report_ranks(char **files, uint32_t n, unsigned top, bool json, bool native);
int mt_cmd_export(int argc, char **argv);
int mt_cmd_diff(int argc, char **argv);

/*
 * Helpers of the analysis commands (cmd-common.c).
 *
 * Reads and replays file (progress on stderr if it is a terminal, whatever
 * extra says of progress); prints the one-line error. extra may be NULL.
 * Unless native, the stacks are grouped by their Python stack
 * (mt_analysis_group, with the user's MEMTRACE_PLUMBING).
 */
int mt_cmd_analyze(const char *file, const struct mt_analysis_hooks *extra, bool native,
                   struct mt_analysis **out);
/* extra for a command that prints frames and adds nothing to the replay: the modules'
 * debug information is read while it runs */
extern const struct mt_analysis_hooks mt_cmd_frames;
/* "memtrace: FILE: byte N: what is wrong" */
void mt_cmd_trace_error(const char *file, const struct mt_error *err, int r);
/* One line each when the trace was cut or is still being written. */
void mt_cmd_trace_warning(const char *file, const struct mt_trace *t);
/* A string written to f with MT_ESCAPE_CONTROL. */
void mt_put_text(FILE *f, const char *s);
/* s as a JSON string, escaped (flags 0); null for NULL; NULL without memory. */
json_t *mt_json_text(const char *s);
/* function (file.c:12), or module+0xoffset, or 0xaddress, names escaped for text */
void mt_cmd_frame_text(char *buf, size_t n, const struct mt_sym *s);
/*
 * A stack's label (label.h) as text, for its count > 0 frames: the label
 * frame as mt_cmd_frame_text writes it and, when frames were passed over,
 * the function that allocated where the buffer has room for it:
 * "step (train.c:42, via c10::alloc_cpu)". The user's plumbing patterns
 * come from MEMTRACE_PLUMBING.
 */
void mt_cmd_label_text(char *buf, size_t n, const struct mt_sym *syms, int count);
/* The index of the label frame among count > 0 frames, with the user's patterns. */
int mt_cmd_label_frame(const struct mt_sym *syms, int count);
/* The command line, or the executable when it is empty. */
const char *mt_cmd_command(const struct mt_instance *in);
/*
 * Why the trace cannot support a verdict (check, diff's gates), or NULL: a
 * gate must not pass on data that is not all there (the blocks a leak would
 * be in may be what is missing) nor on a program that has not ended (unless
 * live_ok: check's mark windows, whole once their closing mark is written).
 * buf (size bytes) may hold the text.
 */
const char *mt_cmd_no_verdict(const struct mt_analysis *a, bool live_ok, char *buf, size_t size);
/* "main returned", "exit()", "_exit()" or "status unknown". */
const char *mt_cmd_exit_how(uint32_t how);
/*
 * When a process of the trace was captured in sampled mode (docs/sampling.md),
 * one line to f, after prefix, that the host figures are estimates, with the
 * interval; nothing for a full capture.
 */
void mt_cmd_sampling_note(FILE *f, const char *prefix, const struct mt_analysis *a);
/*
 * The rows of k with a value for metric m, largest first; a block of 0
 * bytes counts for the peak and the leaks. The caller frees; NULL without
 * memory.
 */
struct mt_stack_row *mt_cmd_ranked(const struct mt_kind_result *k, enum mt_metric m, size_t *n);
/* --top's argument: a positive number; prints the error and returns -EINVAL otherwise. */
int mt_cmd_parse_top(const char *command, const char *arg, unsigned *top);

/*
 * A file a command writes (cmd-common.c): a new temporary file beside path,
 * renamed over path by commit, so a symlink planted at path is replaced,
 * never followed, and a failure leaves the old file as it was. "-" is
 * standard output; a device, FIFO or the file of standard output or error
 * is written in place, never replaced. Each returns 0 or negative errno;
 * commit and abort remove the temporary on failure.
 */
struct mt_output {
	FILE *f;
	const char *path;
	char *tmp;
};
int mt_cmd_output_open(struct mt_output *o, const char *path);
int mt_cmd_output_commit(struct mt_output *o);
void mt_cmd_output_abort(struct mt_output *o);
/*
 * Runs cmd with SIGBUS caught: a trace truncated while it is read (it is
 * mapped) ends the command with one line naming the file given to
 * mt_cmd_reading, and exit status 2, instead of killing memtrace.
 */
int mt_cmd_guarded(int (*cmd)(int argc, char **argv), int argc, char **argv);
/* The trace the command reads from now on (mt_cmd_analyze says it itself). */
void mt_cmd_reading(const char *file);

#endif
