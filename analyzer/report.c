/* SPDX-License-Identifier: MIT */
/*
 * memtrace report: what a person reads about a trace, top to bottom, per
 * process and memory kind: totals, the peak and the stacks that held it,
 * the leaks and their stacks, failed allocations, temporaries and a size
 * histogram. `--json` prints the same as one object (docs/json-report.md).
 *
 * Also the helpers the analysis commands share (commands.h): opening a
 * trace with progress and the one-line error, sizes and frames as text.
 *
 * May not: compute figures (analysis.c does) or print a stack it did not
 * rank: only the stacks shown are symbolized.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "commands.h"

#define MAX_FRAMES  512
#define TEXT_FRAMES 5

/* ---- helpers shared by report, flamegraph and check ---- */

struct progress {
	const char *file;
	double start, last;
	bool shown;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Only for long analyses: nothing during the first second, then 4 times a second. */
static void show_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress *p = ctx;
	double t = now_s();

	if (t - p->start < 1.0 || t - p->last < 0.25)
		return;
	p->last = t;
	p->shown = true;
	fprintf(stderr, "\rmemtrace: %s: %3.0f%% (%.1fM of %.1fM events)", p->file,
	        total ? 100.0 * (double)done / (double)total : 0.0, (double)done / 1e6,
	        (double)total / 1e6);
	fflush(stderr);
}

void mt_cmd_trace_error(const char *file, const struct mt_error *err, int r)
{
	if (err->message[0] && (r == -EBADMSG || r == -EPROTONOSUPPORT))
		fprintf(stderr, "memtrace: %s: byte %" PRIu64 " (0x%" PRIx64 "): %s\n", file,
		        err->offset, err->offset, err->message);
	else if (err->message[0])
		fprintf(stderr, "memtrace: %s: %s\n", file, err->message);
	else
		fprintf(stderr, "memtrace: %s: %s\n", file, strerror(-r));
}

int mt_cmd_analyze(const char *file, struct mt_analysis **out)
{
	struct progress p = {.file = file, .start = now_s()};
	struct mt_analysis_progress cb = {show_progress, &p};
	struct mt_error err = {0};
	int r;

	r = mt_analysis_open(out, file, isatty(STDERR_FILENO) ? &cb : NULL, &err);
	if (p.shown)
		fputs("\r\033[K", stderr);
	if (r < 0) {
		mt_cmd_trace_error(file, &err, r);
		return MT_EXIT_BAD_TRACE;
	}
	return MT_EXIT_OK;
}

void mt_cmd_size(char *buf, size_t n, uint64_t bytes)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, n, "%" PRIu64 " B", bytes);
		return;
	}
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, n, "%.*f %s", v < 10.0 ? 2 : v < 100.0 ? 1 : 0, v, units[u]);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

void mt_cmd_frame_text(char *buf, size_t n, const struct mt_sym *s)
{
	if (s->function && s->file)
		snprintf(buf, n, "%s (%s:%" PRIu32 ")", s->function, base_name(s->file), s->line);
	else if (s->function && s->module)
		snprintf(buf, n, "%s (%s)", s->function, base_name(s->module));
	else if (s->function)
		snprintf(buf, n, "%s", s->function);
	else if (s->module)
		snprintf(buf, n, "%s+0x%" PRIx64, base_name(s->module), s->offset);
	else
		snprintf(buf, n, "0x%" PRIx64, s->address);
}

const char *mt_cmd_command(const struct mt_instance *in)
{
	if (in->cmdline && in->cmdline[0])
		return in->cmdline;
	if (in->exe && in->exe[0])
		return in->exe;
	return "?";
}

/* ---- the report ---- */

static const char *how_text(uint32_t how)
{
	switch (how) {
	case MT_EXIT_MAIN_RETURN:
		return "main returned";
	case MT_EXIT_EXIT:
		return "exit()";
	case MT_EXIT_UNDERSCORE:
		return "_exit()";
	default:
		return "status unknown";
	}
}

static const char *errno_name(uint32_t e)
{
	switch (e) {
	case ENOMEM:
		return "ENOMEM";
	case EINVAL:
		return "EINVAL";
	case EAGAIN:
		return "EAGAIN";
	default:
		return NULL;
	}
}

static bool kind_empty(const struct mt_kind_result *k)
{
	return !k->stats.allocations && !k->stats.live_bytes && !k->stats.failed &&
	       !k->stats.inherited_blocks && !k->stats.frees;
}

/* Rows sorted by m, with a value; the caller frees. */
static struct mt_stack_row *ranked(const struct mt_kind_result *k, enum mt_metric m, size_t *n)
{
	struct mt_stack_row *rows = malloc((k->nrows ? k->nrows : 1) * sizeof(*rows));
	size_t kept = 0;

	*n = 0;
	if (!rows)
		return NULL;
	/* a block of 0 bytes is a leak all the same */
	for (size_t i = 0; i < k->nrows; i++)
		if (mt_stack_row_value(&k->rows[i], m) ||
		    (m == MT_METRIC_LEAKED && k->rows[i].leaked_blocks) ||
		    (m == MT_METRIC_PEAK && k->rows[i].peak_blocks))
			rows[kept++] = k->rows[i];
	mt_stack_rows_sort(rows, kept, m);
	*n = kept;
	return rows;
}

static void print_frames(struct mt_analysis *a, struct mt_sym *syms, uint32_t si, uint32_t stack,
                         const char *indent)
{
	char line[1024];
	int n = mt_analysis_frames(a, si, stack, syms, MAX_FRAMES);

	if (n <= 0) {
		printf("%s(no stack recorded)\n", indent);
		return;
	}
	for (int i = 0; i < n && i < TEXT_FRAMES; i++) {
		mt_cmd_frame_text(line, sizeof(line), &syms[i]);
		printf("%s%s\n", indent, line);
	}
	if (n > TEXT_FRAMES)
		printf("%s... %d more frames\n", indent, n - TEXT_FRAMES);
}

static void print_stacks(struct mt_analysis *a, struct mt_sym *syms, const struct mt_kind_result *k,
                         enum mt_metric m, unsigned top)
{
	size_t n;
	struct mt_stack_row *rows = ranked(k, m, &n);
	char size[32];

	for (size_t i = 0; rows && i < n && i < top; i++) {
		uint64_t bytes = m == MT_METRIC_PEAK ? rows[i].peak_bytes : rows[i].leaked_bytes;
		uint64_t blocks = m == MT_METRIC_PEAK ? rows[i].peak_blocks : rows[i].leaked_blocks;
		mt_cmd_size(size, sizeof(size), bytes);
		printf("      %s in %" PRIu64 " block%s\n", size, blocks, blocks == 1 ? "" : "s");
		print_frames(a, syms, rows[i].stack_instance, rows[i].stack, "        ");
	}
	if (rows && n > top)
		printf("      ... %zu more stack%s\n", n - top, n - top == 1 ? "" : "s");
	free(rows);
}

static void print_histogram(const struct mt_kind_result *k)
{
	char lo[32];
	bool any = false;

	for (int b = 0; b < MT_HISTOGRAM_BUCKETS; b++) {
		if (!k->histogram[b])
			continue;
		mt_cmd_size(lo, sizeof(lo), b ? UINT64_C(1) << (b - 1) : 0);
		printf("%s%s%s: %" PRIu64, any ? ", " : "    sizes: ", b ? ">= " : "", lo,
		       k->histogram[b]);
		any = true;
	}
	if (any)
		putchar('\n');
}

static void print_kind(struct mt_analysis *a, struct mt_sym *syms,
                       const struct mt_process_result *p, enum mt_kind kind, unsigned top)
{
	const struct mt_kind_result *k = &p->kind[kind];
	const struct mt_kind_stats *s = &k->stats;
	char b1[32], b2[32];

	mt_cmd_size(b1, sizeof(b1), s->bytes_allocated);
	printf("  %s: %" PRIu64 " allocations, %" PRIu64 " frees, %s allocated, %" PRIu64
	       " temporary",
	       mt_kind_name(kind), s->allocations, s->frees, b1, k->temporary);
	if (s->inherited_blocks) {
		mt_cmd_size(b1, sizeof(b1), s->inherited_bytes);
		printf(", %s in %" PRIu64 " blocks inherited at fork", b1, s->inherited_blocks);
	}
	putchar('\n');
	mt_cmd_size(b1, sizeof(b1), s->peak_bytes);
	printf("    peak %s in %" PRIu64 " block%s at %.3f ms\n", b1, s->peak_blocks,
	       s->peak_blocks == 1 ? "" : "s",
	       (double)mt_analysis_since_start(a, p->in, s->peak_time) / 1e6);
	print_stacks(a, syms, k, MT_METRIC_PEAK, top);
	mt_cmd_size(b1, sizeof(b1), k->leaked_bytes);
	if (p->in->end == MT_END_EXEC) {
		mt_cmd_size(b2, sizeof(b2), s->live_bytes);
		printf("    no leaks: the exec dropped the %s then live\n", b2);
	} else if (k->leaked_blocks) {
		printf("    %s %s in %" PRIu64 " block%s\n",
		       p->in->end == MT_END_EXIT ? "leaked" : "live at death", b1, k->leaked_blocks,
		       k->leaked_blocks == 1 ? "" : "s");
		print_stacks(a, syms, k, MT_METRIC_LEAKED, top);
	} else {
		printf("    no leaks\n");
	}
	if (s->failed) {
		printf("    failed allocations: %" PRIu64 "\n", s->failed);
		for (uint32_t i = 0; i < k->nfails && i < top; i++) {
			const struct mt_fail_snapshot *f = &k->fails[i];
			const char *fn = mt_fn_name(f->event.fn), *en = errno_name(f->event.err);
			mt_cmd_size(b1, sizeof(b1), f->event.size);
			mt_cmd_size(b2, sizeof(b2), f->live_bytes);
			printf("      %s of %s at %.3f ms: ", fn ? fn : "?", b1,
			       (double)mt_analysis_since_start(a, p->in, f->event.time) / 1e6);
			if (f->event.kind >= MT_KIND_CUDA_HOST)
				printf("CUDA error %" PRIu32 "%s", f->event.err,
				       f->event.err == 2 ? " (cudaErrorMemoryAllocation)" : "");
			else if (en)
				printf("%s", en);
			else
				printf("errno %" PRIu32, f->event.err);
			printf(", %s live in %" PRIu64 " blocks\n", b2, f->live_blocks);
			if (f->have_sample_before && f->event.kind < MT_KIND_CUDA_HOST &&
			    f->heap_free_before) {
				char b3[32], b4[32];
				mt_cmd_size(b3, sizeof(b3), f->heap_free_before);
				mt_cmd_size(b4, sizeof(b4), f->rss_before);
				printf("        asked %s with %s free in the heap (RSS %s): %s\n",
				       b1, b3, b4,
				       f->event.size > f->heap_free_before
				               ? "more than everything free"
				               : "enough in total, but not in one piece");
			}
			if (f->event.device_total) {
				char b3[32], b4[32];
				mt_cmd_size(b3, sizeof(b3), f->event.device_free);
				mt_cmd_size(b4, sizeof(b4), f->event.device_total);
				printf("        the device had %s free of %s: %s\n", b3, b4,
				       f->event.size > f->event.device_free
				               ? "the request is larger than all that is free"
				               : "enough in total, but not in one piece "
				                 "(fragmentation, or a "
				                 "caching allocator holding it)");
			}
			print_frames(a, syms, p->in->id, f->event.stack, "        ");
			for (uint32_t t = 0; t < f->ntop && t < 3; t++) {
				mt_cmd_size(b2, sizeof(b2), f->top[t].leaked_bytes);
				printf("        held then: %s in %" PRIu64 " blocks by\n", b2,
				       f->top[t].leaked_blocks);
				print_frames(a, syms, f->top[t].stack_instance, f->top[t].stack,
				             "          ");
			}
		}
	}
	print_histogram(k);
}

/* ---- diagnosis ---- */

/* The row of a stack in a kind's result, for its allocation counts; a zero row if none. */
static struct mt_stack_row find_row(const struct mt_kind_result *k, uint32_t si, uint32_t stack)
{
	struct mt_stack_row none = {.stack = stack, .stack_instance = si};

	for (size_t i = 0; i < k->nrows; i++)
		if (k->rows[i].stack == stack && k->rows[i].stack_instance == si)
			return k->rows[i];
	return none;
}

/* "fn (file:line)" of a stack's first frame, the code that asked. */
static void top_frame(struct mt_analysis *a, struct mt_sym *syms, uint32_t si, uint32_t stack,
                      char *buf, size_t n)
{
	int got = mt_analysis_frames(a, si, stack, syms, MAX_FRAMES);

	if (got <= 0)
		snprintf(buf, n, "(no stack recorded)");
	else
		mt_cmd_frame_text(buf, n, &syms[0]);
}

static void print_growth_line(struct mt_analysis *a, struct mt_sym *syms, const struct mt_growth *g,
                              const char *indent)
{
	char b1[32], b2[32], b3[32], frame[1024];

	mt_cmd_size(b1, sizeof(b1), g->grown_bytes > 0 ? (uint64_t)g->grown_bytes : 0);
	mt_cmd_size(b2, sizeof(b2), g->bytes_per_second > 0 ? (uint64_t)g->bytes_per_second : 0);
	top_frame(a, syms, g->stack_instance, g->stack, frame, sizeof(frame));
	printf("%sgrows", indent);
	if (g->per_mark && g->bytes_per_mark > 0) {
		mt_cmd_size(b3, sizeof(b3), (uint64_t)g->bytes_per_mark);
		printf(": %s per mark,", b3);
	}
	printf(" %s/s, %s in all (%s, fit r2 %.2f), by %s\n", b2, b1, mt_kind_name(g->kind), g->r2,
	       frame);
}

static void print_diagnosis(struct mt_analysis *a, struct mt_sym *syms,
                            const struct mt_process_result *p, unsigned top)
{
	const struct mt_diagnosis *d = &p->diag;
	const struct mt_memory_over_time *m = &d->mem;
	char b1[32], b2[32], b3[32];

	if (!d->ngrowth && !m->samples && !p->in->nmarks && !d->post_mortem.killed)
		return;
	printf("  diagnosis:\n");
	if (d->post_mortem.killed) {
		const struct mt_post_mortem *pm = &d->post_mortem;
		mt_cmd_size(b1, sizeof(b1), p->kind[MT_KIND_HOST].leaked_bytes);
		if (pm->have_sample && pm->cgroup_max) {
			mt_cmd_size(b2, sizeof(b2), pm->last_rss);
			mt_cmd_size(b3, sizeof(b3), pm->cgroup_max);
			printf("    killed at %s RSS against a cgroup limit of %s", b2, b3);
			mt_cmd_size(b2, sizeof(b2), pm->cgroup_current);
			printf(" (memory.current %s); %s of heap live at death\n", b2, b1);
		} else if (pm->have_sample) {
			mt_cmd_size(b2, sizeof(b2), pm->last_rss);
			printf("    killed at %s RSS (no cgroup limit known); %s of heap live at "
			       "death\n",
			       b2, b1);
		} else {
			printf("    killed; %s of heap live at death (no samples)\n", b1);
		}
	}
	for (size_t i = 0; i < d->ngrowth && i < top && i < 3; i++)
		print_growth_line(a, syms, &d->growth[i], "    ");
	if (d->ngrowth > 3 && top > 3)
		printf("    ... %zu more growing stack%s (--json)\n", d->ngrowth - 3,
		       d->ngrowth - 3 == 1 ? "" : "s");
	if (p->in->nmarks)
		printf("    %u mark%s, the last \"%s\"\n", p->in->nmarks,
		       p->in->nmarks == 1 ? "" : "s", p->in->marks[p->in->nmarks - 1].label);
	if (m->samples) {
		mt_cmd_size(b1, sizeof(b1), m->rss_peak);
		mt_cmd_size(b2, sizeof(b2), m->rss_last);
		printf("    RSS peak %s, last %s", b1, b2);
		if (m->pss_peak) {
			mt_cmd_size(b1, sizeof(b1), m->pss_peak);
			printf("; Pss peak %s", b1);
		}
		if (m->private_dirty_last > m->private_dirty_first &&
		    p->in->origin == MT_ORIGIN_FORK) {
			mt_cmd_size(b1, sizeof(b1), m->private_dirty_first);
			mt_cmd_size(b2, sizeof(b2), m->private_dirty_last);
			mt_cmd_size(b3, sizeof(b3), m->private_dirty_last - m->private_dirty_first);
			printf("; copy-on-write: Private_Dirty %s -> %s (+%s)", b1, b2, b3);
		}
		putchar('\n');
	}
	for (uint32_t i = 0; i < d->frag.nfindings; i++)
		printf("    %s: %s: %s\n", d->frag.findings[i].name, d->frag.findings[i].text,
		       d->frag.findings[i].advice);
}

static void print_text(struct mt_analysis *a, const char *file, unsigned top)
{
	struct mt_sym *syms = calloc(MAX_FRAMES, sizeof(*syms));
	char b1[32];

	if (!syms)
		return;
	printf("memtrace report: %s: %u process%s, %" PRIu64 " events\n", file, a->nprocs,
	       a->nprocs == 1 ? "" : "es", a->events);
	for (uint32_t i = 0; i < a->nprocs; i++) {
		const struct mt_process_result *p = &a->procs[i];
		const struct mt_instance *in = p->in;

		printf("\nprocess %u (ppid %u): %s\n", in->pid, in->ppid, mt_cmd_command(in));
		switch (in->end) {
		case MT_END_KILLED:
			mt_cmd_size(b1, sizeof(b1), p->kind[MT_KIND_HOST].leaked_bytes);
			printf("  killed (no exit record): %s live at death", b1);
			if (p->kind[MT_KIND_MMAP].leaked_bytes) {
				mt_cmd_size(b1, sizeof(b1), p->kind[MT_KIND_MMAP].leaked_bytes);
				printf(", %s mmap", b1);
			}
			putchar('\n');
			break;
		case MT_END_EXIT:
			printf("  exited with status %u (%s)\n", in->exit_status,
			       how_text(in->exit_how));
			break;
		case MT_END_EXEC:
			printf("  replaced by exec\n");
			break;
		case MT_END_STOPPED:
			printf("  tracing stopped (errno %" PRId64 "): the figures end there\n",
			       in->stopped_errno);
			break;
		}
		if (in->origin == MT_ORIGIN_FORK)
			printf("  forked from process %u\n", in->ppid);
		if (in->lost_stack_events)
			printf("  %" PRIu64 " events without a stack (the stack table was full)\n",
			       in->lost_stack_events);
		for (int k = 0; k < MT_KIND_COUNT; k++)
			if (!kind_empty(&p->kind[k]))
				print_kind(a, syms, p, (enum mt_kind)k, top);
		print_diagnosis(a, syms, p, top);
	}
	if (a->tree.sampled > 1) {
		char b2[32];
		mt_cmd_size(b1, sizeof(b1), a->tree.combined_rss_peak);
		mt_cmd_size(b2, sizeof(b2), a->tree.combined_pss_peak);
		printf("\nprocess tree: %u processes, combined peak RSS %s (at %.3f s), Pss %s\n",
		       a->tree.processes, b1, (double)a->tree.time_ns / 1e9, b2);
	}
	free(syms);
}

/* ---- JSON ---- */

static json_t *json_u64(uint64_t v)
{
	/* jansson integers are signed 64-bit; larger sizes (an overflowed calloc) become reals */
	return v > INT64_MAX ? json_real((double)v) : json_integer((json_int_t)v);
}

static json_t *json_str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *frames_json(struct mt_analysis *a, struct mt_sym *syms, uint32_t si, uint32_t stack)
{
	json_t *frames = json_array();
	int n = mt_analysis_frames(a, si, stack, syms, MAX_FRAMES);

	for (int i = 0; i < n; i++) {
		json_t *f = json_object();
		json_object_set_new(f, "function", json_str_or_null(syms[i].function));
		json_object_set_new(f, "file", json_str_or_null(syms[i].file));
		json_object_set_new(f, "line", json_integer(syms[i].line));
		json_object_set_new(f, "module", json_str_or_null(syms[i].module));
		json_object_set_new(f, "address", json_u64(syms[i].address));
		json_object_set_new(f, "offset", json_u64(syms[i].offset));
		json_object_set_new(f, "inlined", json_boolean(syms[i].inlined));
		json_array_append_new(frames, f);
	}
	return frames;
}

static json_t *stack_json(struct mt_analysis *a, struct mt_sym *syms,
                          const struct mt_stack_row *row, uint64_t bytes, uint64_t blocks)
{
	json_t *o = json_object();

	json_object_set_new(o, "bytes", json_u64(bytes));
	json_object_set_new(o, "blocks", json_u64(blocks));
	json_object_set_new(o, "allocations", json_u64(row->allocations));
	json_object_set_new(o, "temporary", json_u64(row->temporary));
	json_object_set_new(o, "stack", json_integer(row->stack));
	json_object_set_new(o, "stack_instance", json_integer(row->stack_instance));
	json_object_set_new(o, "frames", frames_json(a, syms, row->stack_instance, row->stack));
	return o;
}

static json_t *stacks_json(struct mt_analysis *a, struct mt_sym *syms,
                           const struct mt_kind_result *k, enum mt_metric m, unsigned top,
                           size_t *total)
{
	json_t *arr = json_array();
	size_t n;
	struct mt_stack_row *rows = ranked(k, m, &n);

	*total = n;
	for (size_t i = 0; rows && i < n && i < top; i++) {
		const struct mt_stack_row *r = &rows[i];
		json_array_append_new(
		        arr, m == MT_METRIC_PEAK
		                     ? stack_json(a, syms, r, r->peak_bytes, r->peak_blocks)
		                     : stack_json(a, syms, r, r->leaked_bytes, r->leaked_blocks));
	}
	free(rows);
	return arr;
}

static json_t *kind_json(struct mt_analysis *a, struct mt_sym *syms,
                         const struct mt_process_result *p, enum mt_kind kind, unsigned top)
{
	const struct mt_kind_result *k = &p->kind[kind];
	const struct mt_kind_stats *s = &k->stats;
	json_t *o = json_object(), *fails = json_array(), *hist = json_array();
	size_t total;

	json_object_set_new(o, "allocations", json_u64(s->allocations));
	json_object_set_new(o, "frees", json_u64(s->frees));
	json_object_set_new(o, "bytes_allocated", json_u64(s->bytes_allocated));
	json_object_set_new(o, "temporary_allocations", json_u64(k->temporary));
	json_object_set_new(o, "peak_bytes", json_u64(s->peak_bytes));
	json_object_set_new(o, "peak_blocks", json_u64(s->peak_blocks));
	json_object_set_new(o, "peak_time_ns",
	                    json_u64(mt_analysis_since_start(a, p->in, s->peak_time)));
	json_object_set_new(o, "leaked_bytes", json_u64(k->leaked_bytes));
	json_object_set_new(o, "leaked_blocks", json_u64(k->leaked_blocks));
	json_object_set_new(o, "live_at_end_bytes", json_u64(s->live_bytes));
	json_object_set_new(o, "live_at_end_blocks", json_u64(s->live_blocks));
	json_object_set_new(o, "inherited_bytes", json_u64(s->inherited_bytes));
	json_object_set_new(o, "inherited_blocks", json_u64(s->inherited_blocks));
	json_object_set_new(o, "unknown_frees", json_u64(s->unknown_frees));
	json_object_set_new(o, "failed_allocations", json_u64(s->failed));
	json_object_set_new(o, "peak_stacks", stacks_json(a, syms, k, MT_METRIC_PEAK, top, &total));
	json_object_set_new(o, "peak_stacks_total", json_u64(total));
	json_object_set_new(o, "leak_stacks",
	                    stacks_json(a, syms, k, MT_METRIC_LEAKED, top, &total));
	json_object_set_new(o, "leak_stacks_total", json_u64(total));
	for (uint32_t i = 0; i < k->nfails; i++) {
		const struct mt_fail_snapshot *f = &k->fails[i];
		const char *fn = mt_fn_name(f->event.fn);
		json_t *fo = json_object(), *held = json_array(), *st = json_object();
		json_object_set_new(fo, "function", json_string(fn ? fn : "unknown"));
		json_object_set_new(fo, "size", json_u64(f->event.size));
		/* a CUDA failure's code is a cudaError_t or CUresult, not an errno */
		json_object_set_new(fo, f->event.kind >= MT_KIND_CUDA_HOST ? "cuda_error" : "errno",
		                    json_integer(f->event.err));
		json_object_set_new(fo, "time_ns",
		                    json_u64(mt_analysis_since_start(a, p->in, f->event.time)));
		json_object_set_new(fo, "live_bytes", json_u64(f->live_bytes));
		json_object_set_new(fo, "live_blocks", json_u64(f->live_blocks));
		if (f->event.kind < MT_KIND_CUDA_HOST) {
			json_object_set_new(fo, "heap_free_before",
			                    f->have_sample_before ? json_u64(f->heap_free_before)
			                                          : json_null());
			json_object_set_new(fo, "rss_before",
			                    f->have_sample_before ? json_u64(f->rss_before)
			                                          : json_null());
		}
		if (f->event.device_total) {
			json_object_set_new(fo, "device_free", json_u64(f->event.device_free));
			json_object_set_new(fo, "device_total", json_u64(f->event.device_total));
		}
		json_object_set_new(st, "bytes", json_u64(f->event.size));
		json_object_set_new(st, "blocks", json_integer(0));
		json_object_set_new(st, "stack", json_integer(f->event.stack));
		json_object_set_new(st, "stack_instance", json_integer(p->in->id));
		json_object_set_new(st, "frames", frames_json(a, syms, p->in->id, f->event.stack));
		json_object_set_new(fo, "stack", st);
		for (uint32_t t = 0; t < f->ntop; t++)
			json_array_append_new(held, stack_json(a, syms, &f->top[t],
			                                       f->top[t].leaked_bytes,
			                                       f->top[t].leaked_blocks));
		json_object_set_new(fo, "top_stacks", held);
		json_array_append_new(fails, fo);
	}
	json_object_set_new(o, "failures", fails);
	for (int b = 0; b < MT_HISTOGRAM_BUCKETS; b++) {
		json_t *h;
		if (!k->histogram[b])
			continue;
		h = json_object();
		json_object_set_new(h, "min", json_u64(b ? UINT64_C(1) << (b - 1) : 0));
		json_object_set_new(h, "max",
		                    json_u64(b == 0    ? 0
		                             : b == 64 ? UINT64_MAX
		                                       : (UINT64_C(1) << b) - 1));
		json_object_set_new(h, "count", json_u64(k->histogram[b]));
		json_array_append_new(hist, h);
	}
	json_object_set_new(o, "histogram", hist);
	return o;
}

static json_t *growth_json(struct mt_analysis *a, struct mt_sym *syms,
                           const struct mt_process_result *p, const struct mt_growth *g)
{
	json_t *o = json_object();
	struct mt_stack_row row = find_row(&p->kind[g->kind], g->stack_instance, g->stack);

	json_object_set_new(o, "kind", json_string(mt_kind_name(g->kind)));
	json_object_set_new(o, "bytes_per_second", json_real(g->bytes_per_second));
	json_object_set_new(o, "grown_bytes", json_integer(g->grown_bytes));
	json_object_set_new(o, "bytes_per_mark",
	                    g->per_mark ? json_real(g->bytes_per_mark) : json_null());
	json_object_set_new(o, "r2", json_real(g->r2));
	json_object_set_new(o, "r2_per_mark",
	                    g->per_mark ? json_real(g->r2_per_mark) : json_null());
	json_object_set_new(o, "stack",
	                    stack_json(a, syms, &row,
	                               g->grown_bytes > 0 ? (uint64_t)g->grown_bytes : 0,
	                               row.leaked_blocks));
	return o;
}

static json_t *live_json(const struct mt_instance *in, const uint64_t *live)
{
	json_t *o = json_object();

	for (int k = 0; k < MT_KIND_COUNT; k++)
		if (mt_kind_shown(in, (unsigned)k))
			json_object_set_new(o, mt_kind_name((unsigned)k), json_u64(live[k]));
	return o;
}

static json_t *diagnosis_json(struct mt_analysis *a, struct mt_sym *syms,
                              const struct mt_process_result *p, unsigned top)
{
	const struct mt_instance *in = p->in;
	const struct mt_diagnosis *d = &p->diag;
	const struct mt_memory_over_time *m = &d->mem;
	const struct mt_fragmentation *f = &d->frag;
	json_t *o = json_object(), *growth = json_array(), *marks = json_array();

	for (size_t i = 0; i < d->ngrowth && i < top; i++)
		json_array_append_new(growth, growth_json(a, syms, p, &d->growth[i]));
	json_object_set_new(o, "growth", growth);
	json_object_set_new(o, "growth_total", json_u64(d->ngrowth));
	for (uint32_t i = 0; i < in->nmarks; i++) {
		json_t *mk = json_object();
		json_object_set_new(mk, "label", json_string(in->marks[i].label));
		json_object_set_new(mk, "time_ns",
		                    json_u64(mt_analysis_since_start(a, in, in->marks[i].time)));
		json_object_set_new(mk, "live", live_json(in, in->marks[i].live));
		json_array_append_new(marks, mk);
	}
	json_object_set_new(o, "marks", marks);
	if (m->samples) {
		json_t *mo = json_object();
		json_object_set_new(mo, "samples", json_u64(m->samples));
#define SET(key) json_object_set_new(mo, #key, json_u64(m->key))
		SET(rss_first);
		SET(rss_last);
		SET(rss_peak);
		SET(pss_first);
		SET(pss_last);
		SET(pss_peak);
		SET(private_dirty_first);
		SET(private_dirty_last);
		SET(private_dirty_peak);
		SET(heap_arena_last);
		SET(heap_in_use_last);
		SET(heap_free_last);
		SET(heap_trimmable_last);
		SET(heap_mmapped_last);
		SET(cgroup_current_peak);
		SET(cgroup_max);
#undef SET
		json_object_set_new(mo, "rss_peak_time_ns",
		                    json_u64(mt_analysis_since_start(a, in, m->rss_peak_time)));
		json_object_set_new(mo, "private_dirty_growth",
		                    json_integer((json_int_t)m->private_dirty_last -
		                                 (json_int_t)m->private_dirty_first));
		json_object_set_new(o, "memory_over_time", mo);
	} else {
		json_object_set_new(o, "memory_over_time", json_null());
	}
	if (f->have) {
		json_t *fo = json_object(), *fs = json_array();
		json_object_set_new(fo, "rss_minus_live_peak",
		                    json_integer(f->rss_minus_live_peak));
		json_object_set_new(fo, "time_ns",
		                    json_u64(mt_analysis_since_start(a, in, f->time)));
		json_object_set_new(fo, "rss", json_u64(f->rss));
		json_object_set_new(fo, "live_host_bytes", json_u64(f->live_host_bytes));
		json_object_set_new(fo, "heap_free", json_u64(f->heap_free));
		json_object_set_new(fo, "heap_trimmable", json_u64(f->heap_trimmable));
		json_object_set_new(fo, "trim_would_return", json_u64(f->trim_would_return));
		for (uint32_t i = 0; i < f->nfindings; i++) {
			json_t *x = json_object();
			json_object_set_new(x, "finding", json_string(f->findings[i].name));
			json_object_set_new(x, "figure", json_u64(f->findings[i].figure));
			json_object_set_new(x, "text", json_string(f->findings[i].text));
			json_object_set_new(x, "advice", json_string(f->findings[i].advice));
			json_array_append_new(fs, x);
		}
		json_object_set_new(fo, "findings", fs);
		json_object_set_new(o, "fragmentation", fo);
	} else {
		json_object_set_new(o, "fragmentation", json_null());
	}
	if (d->post_mortem.killed) {
		const struct mt_post_mortem *pm = &d->post_mortem;
		json_t *po = json_object(), *grow = json_array();
		uint64_t live[MT_KIND_COUNT];
		for (int k = 0; k < MT_KIND_COUNT; k++)
			live[k] = p->kind[k].leaked_bytes;
		json_object_set_new(po, "last_rss",
		                    pm->have_sample ? json_u64(pm->last_rss) : json_null());
		json_object_set_new(po, "cgroup_current",
		                    pm->have_sample ? json_u64(pm->cgroup_current) : json_null());
		json_object_set_new(po, "cgroup_max",
		                    pm->have_sample ? json_u64(pm->cgroup_max) : json_null());
		json_object_set_new(po, "time_ns",
		                    pm->have_sample
		                            ? json_u64(mt_analysis_since_start(a, in, pm->time))
		                            : json_null());
		json_object_set_new(po, "end_time_ns",
		                    json_u64(mt_analysis_since_start(a, in, in->end_time)));
		json_object_set_new(po, "live_at_death", live_json(in, live));
		for (size_t i = 0; i < d->ngrowth && i < 3; i++)
			json_array_append_new(grow, growth_json(a, syms, p, &d->growth[i]));
		json_object_set_new(po, "growing", grow);
		json_object_set_new(o, "post_mortem", po);
	} else {
		json_object_set_new(o, "post_mortem", json_null());
	}
	return o;
}

static json_t *tree_json(const struct mt_analysis *a)
{
	json_t *o = json_object();
	bool any = a->tree.sampled > 0;

	json_object_set_new(o, "processes", json_integer(a->tree.processes));
	json_object_set_new(o, "processes_sampled", json_integer(a->tree.sampled));
	json_object_set_new(o, "combined_rss_peak",
	                    any ? json_u64(a->tree.combined_rss_peak) : json_null());
	json_object_set_new(o, "combined_pss_peak",
	                    any ? json_u64(a->tree.combined_pss_peak) : json_null());
	json_object_set_new(o, "time_ns", any ? json_u64(a->tree.time_ns) : json_null());
	return o;
}

static json_t *report_json(struct mt_analysis *a, const char *file, unsigned top)
{
	struct mt_sym *syms = calloc(MAX_FRAMES, sizeof(*syms));
	json_t *root = json_object(), *procs = json_array();

	json_object_set_new(root, "memtrace_report", json_integer(1));
	json_object_set_new(root, "file", json_string(file));
	json_object_set_new(root, "events", json_u64(a->events));
	for (uint32_t i = 0; syms && i < a->nprocs; i++) {
		const struct mt_process_result *p = &a->procs[i];
		const struct mt_instance *in = p->in;
		json_t *o = json_object(), *mem = json_object();

		json_object_set_new(o, "pid", json_integer(in->pid));
		json_object_set_new(o, "ppid", json_integer(in->ppid));
		json_object_set_new(o, "instance", json_integer(in->id));
		json_object_set_new(o, "origin",
		                    json_string(in->origin == MT_ORIGIN_FORK   ? "fork"
		                                : in->origin == MT_ORIGIN_EXEC ? "exec"
		                                                               : "root"));
		json_object_set_new(o, "parent_instance", json_integer(in->parent_instance));
		json_object_set_new(o, "command", json_string(in->cmdline ? in->cmdline : ""));
		json_object_set_new(o, "exe", json_string(in->exe ? in->exe : ""));
		json_object_set_new(o, "end", json_string(mt_end_name(in->end)));
		if (in->end == MT_END_EXIT) {
			json_object_set_new(o, "exit_status", json_integer(in->exit_status));
			json_object_set_new(o, "exit_how", json_string(how_text(in->exit_how)));
		} else {
			json_object_set_new(o, "exit_status", json_null());
		}
		json_object_set_new(o, "threads", json_integer(in->threads));
		json_object_set_new(o, "events", json_u64(in->events));
		json_object_set_new(o, "lost_stack_events", json_u64(in->lost_stack_events));
		for (int k = 0; k < MT_KIND_COUNT; k++)
			if (mt_kind_shown(in, (unsigned)k))
				json_object_set_new(mem, mt_kind_name((unsigned)k),
				                    kind_json(a, syms, p, (enum mt_kind)k, top));
		json_object_set_new(o, "memories", mem);
		json_object_set_new(o, "diagnosis", diagnosis_json(a, syms, p, top));
		json_array_append_new(procs, o);
	}
	json_object_set_new(root, "processes", procs);
	json_object_set_new(root, "tree", tree_json(a));
	free(syms);
	return root;
}

static void usage(FILE *f)
{
	fputs("usage: memtrace report [--top N] [--json] FILE\n", f);
}

int mt_cmd_report(int argc, char **argv)
{
	const char *file = NULL;
	unsigned long top = 5;
	bool json = false;
	struct mt_analysis *a;
	int status;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--top") && i + 1 < argc) {
			char *end;
			top = strtoul(argv[++i], &end, 10);
			if (*end || !argv[i][0] || top == 0 || top > UINT32_MAX) {
				fprintf(stderr,
				        "memtrace report: --top wants a positive number, not %s\n",
				        argv[i]);
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return MT_EXIT_OK;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "memtrace report: unknown option %s\n", argv[i]);
			usage(stderr);
			return MT_EXIT_USAGE;
		} else if (file) {
			fprintf(stderr, "memtrace report: one trace at a time\n");
			return MT_EXIT_USAGE;
		} else {
			file = argv[i];
		}
	}
	if (!file) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	status = mt_cmd_analyze(file, &a);
	if (status != MT_EXIT_OK)
		return status;
	if (json) {
		json_t *root = report_json(a, file, (unsigned)top);
		if (json_dumpf(root, stdout, JSON_INDENT(1)) < 0)
			status = MT_EXIT_BAD_TRACE;
		putchar('\n');
		json_decref(root);
	} else {
		print_text(a, file, (unsigned)top);
	}
	mt_analysis_free(a);
	return status;
}
