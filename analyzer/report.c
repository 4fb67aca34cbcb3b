/* SPDX-License-Identifier: MIT */
/*
 * memtrace report: what a person reads about a trace, top to bottom, per
 * process and memory kind: totals, the peak and the stacks that held it,
 * the leaks and their stacks, failed allocations, temporaries and a size
 * histogram. `--json` prints the same as one object (report-json.c,
 * docs/json-report.md).
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
#include "report-json.h"

#define MAX_FRAMES  512
#define TEXT_FRAMES 5
/* a group's Python frames shown: a script's own line lies under a few of torch's */
#define TEXT_PYTHON_FRAMES 12

/* ---- the report ---- */

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

/* A stack's label (mt_cmd_label_text), the name the report knows it by. */
static void stack_label(struct mt_analysis *a, struct mt_sym *syms, uint32_t si, uint32_t stack,
                        char *buf, size_t n)
{
	int got = mt_analysis_frames(a, si, stack, syms, MAX_FRAMES);

	if (got <= 0)
		snprintf(buf, n, "(no stack recorded)");
	else
		mt_cmd_label_text(buf, n, syms, got);
}

/* A stack's frames, innermost first, the first TEXT_FRAMES of them. */
static void print_frames(struct mt_analysis *a, struct mt_sym *syms, uint32_t si, uint32_t stack,
                         const char *indent)
{
	char line[1024];
	int n = mt_analysis_frames(a, si, stack, syms, MAX_FRAMES);

	if (n <= 0) {
		printf("%s(no stack recorded)\n", indent);
		return;
	}
	if (syms[0].tail) {
		/* a group: its Python frames, where the program's own lines are; the native ones
		 * between them are in --json and --native */
		int shown = 0;
		for (int i = 0; i < n && shown < TEXT_PYTHON_FRAMES; i++) {
			if (i && (!syms[i].module || strcmp(syms[i].module, "python")))
				continue;
			mt_cmd_frame_text(line, sizeof(line), &syms[i]);
			printf("%s%s\n", indent, line);
			shown++;
		}
		if (n > shown)
			printf("%s... %d more frames\n", indent, n - shown);
		return;
	}
	for (int i = 0; i < n && i < TEXT_FRAMES; i++) {
		mt_cmd_frame_text(line, sizeof(line), &syms[i]);
		printf("%s%s\n", indent, line);
	}
	if (n > TEXT_FRAMES)
		printf("%s... %d more frames\n", indent, n - TEXT_FRAMES);
}

/*
 * "definite 96 B in 1, indirect 480 B in 5, possible 0, ...": every class
 * (but unclassified) when all, else only those that hold a block.
 */
static void print_split(const struct mt_leak_count *c, bool all)
{
	char size[32];
	bool first = true;

	for (int i = 0; i < MT_LEAK_CLASS_COUNT; i++) {
		if (!c[i].blocks && (!all || i == MT_LEAK_UNCLASSIFIED))
			continue;
		printf("%s%s ", first ? "" : ", ", mt_leak_class_name((enum mt_leak_class)i));
		first = false;
		if (!c[i].blocks) {
			putchar('0');
			continue;
		}
		mt_size_text(size, sizeof(size), c[i].bytes);
		printf("%s in %" PRIu64, size, c[i].blocks);
	}
}

static void print_stacks(struct mt_analysis *a, struct mt_sym *syms, const struct mt_kind_result *k,
                         enum mt_metric m, unsigned top)
{
	size_t n;
	struct mt_stack_row *rows = mt_cmd_ranked(k, m, &n);
	char size[32], label[1024];

	for (size_t i = 0; rows && i < n && i < top; i++) {
		uint64_t bytes = m == MT_METRIC_PEAK ? rows[i].peak_bytes : rows[i].leaked_bytes;
		uint64_t blocks = m == MT_METRIC_PEAK ? rows[i].peak_blocks : rows[i].leaked_blocks;
		mt_size_text(size, sizeof(size), bytes);
		stack_label(a, syms, rows[i].stack_instance, rows[i].stack, label, sizeof(label));
		printf("      %s in %" PRIu64 " block%s by %s", size, blocks,
		       blocks == 1 ? "" : "s", label);
		if (m == MT_METRIC_LEAKED && k->classified) {
			fputs(" (", stdout);
			print_split(rows[i].reach, false);
			putchar(')');
		}
		putchar('\n');
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

	for (int b = 0; k->histogram && b < MT_HISTOGRAM_BUCKETS; b++) {
		if (!k->histogram[b])
			continue;
		mt_size_text(lo, sizeof(lo), b ? UINT64_C(1) << (b - 1) : 0);
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

	mt_size_text(b1, sizeof(b1), s->bytes_allocated);
	printf("  %s: %" PRIu64 " allocations, %" PRIu64 " frees, %s allocated, %" PRIu64
	       " temporary",
	       mt_kind_name(kind), s->allocations, s->frees, b1, k->temporary);
	if (s->inherited_blocks) {
		mt_size_text(b1, sizeof(b1), s->inherited_bytes);
		printf(", %s in %" PRIu64 " blocks inherited at fork", b1, s->inherited_blocks);
	}
	putchar('\n');
	mt_size_text(b1, sizeof(b1), s->peak_bytes);
	printf("    peak %s in %" PRIu64 " block%s at %.3f ms\n", b1, s->peak_blocks,
	       s->peak_blocks == 1 ? "" : "s",
	       (double)mt_analysis_since_start(a, p->in, s->peak_time) / 1e6);
	print_stacks(a, syms, k, MT_METRIC_PEAK, top);
	mt_size_text(b1, sizeof(b1), k->leaked_bytes);
	if (mt_end_replaced(p->in->end)) {
		mt_size_text(b2, sizeof(b2), s->live_bytes);
		printf("    no leaks: the exec dropped the %s then live\n", b2);
	} else if (k->leaked_blocks) {
		char why[128];
		printf("    %s %s in %" PRIu64 " block%s",
		       p->in->end == MT_END_EXIT ? "leaked" : "live at death", b1, k->leaked_blocks,
		       k->leaked_blocks == 1 ? "" : "s");
		if (k->classified) {
			fputs(": ", stdout);
			print_split(k->leak_kinds, true);
			putchar('\n');
		} else {
			printf("\n      not classified: %s\n",
			       mt_reach_missing(p->in, &p->reach, kind, why, sizeof(why)));
		}
		print_stacks(a, syms, k, MT_METRIC_LEAKED, top);
	} else {
		printf("    no leaks\n");
	}
	if (s->failed) {
		printf("    failed allocations: %" PRIu64 "\n", s->failed);
		for (uint32_t i = 0; i < k->nfails && i < top; i++) {
			const struct mt_fail_snapshot *f = &k->fails[i];
			const char *fn = mt_fn_name(f->event.fn), *en = errno_name(f->event.err);
			mt_size_text(b1, sizeof(b1), f->event.size);
			mt_size_text(b2, sizeof(b2), f->live_bytes);
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
				mt_size_text(b3, sizeof(b3), f->heap_free_before);
				mt_size_text(b4, sizeof(b4), f->rss_before);
				printf("        asked %s with %s free in the heap (RSS %s): %s\n",
				       b1, b3, b4,
				       f->event.size > f->heap_free_before
				               ? "more than everything free"
				               : "enough in total, but not in one piece");
			}
			if (f->event.device_total) {
				char b3[32], b4[32];
				mt_size_text(b3, sizeof(b3), f->event.device_free);
				mt_size_text(b4, sizeof(b4), f->event.device_total);
				printf("        the device had %s free of %s: %s\n", b3, b4,
				       f->event.size > f->event.device_free
				               ? "the request is larger than all that is free"
				               : "enough in total, but not in one piece "
				                 "(fragmentation, or a "
				                 "caching allocator holding it)");
			}
			print_frames(a, syms, p->in->id, f->event.stack, "        ");
			for (uint32_t t = 0; t < f->ntop && t < 3; t++) {
				mt_size_text(b2, sizeof(b2), f->top[t].leaked_bytes);
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

static void print_growth_line(struct mt_analysis *a, struct mt_sym *syms, const struct mt_growth *g,
                              const char *indent)
{
	char b1[32], b2[32], b3[32], from[32], end[32], frame[1024];

	mt_size_text(b1, sizeof(b1), g->grown_bytes > 0 ? (uint64_t)g->grown_bytes : 0);
	mt_size_text(b2, sizeof(b2), g->bytes_per_second > 0 ? (uint64_t)g->bytes_per_second : 0);
	mt_size_text(from, sizeof(from), g->from_bytes);
	mt_size_text(end, sizeof(end), g->end_bytes);
	stack_label(a, syms, g->stack_instance, g->stack, frame, sizeof(frame));
	printf("%sgrows", indent);
	if (g->per_mark) {
		mt_size_text(b3, sizeof(b3), (uint64_t)g->bytes_per_mark);
		printf(": %s per mark,", b3);
	}
	printf(" %s in all (live %s to %s), %s/s (%s), by %s\n", b1, from, end, b2,
	       mt_kind_name(g->kind), frame);
	/* a group's label is a library's line as often as not: its Python frames say whose */
	if (syms[0].tail) {
		snprintf(frame, sizeof(frame), "%s    ", indent);
		print_frames(a, syms, g->stack_instance, g->stack, frame);
	}
}

static void print_diagnosis(struct mt_analysis *a, struct mt_sym *syms,
                            const struct mt_process_result *p, unsigned top)
{
	const struct mt_diagnosis *d = &p->diag;
	const struct mt_memory_over_time *m = &d->mem;
	char b1[32], b2[32], b3[32];

	if (!d->ngrowth && !m->samples && !p->in->nmarks && !d->post_mortem.killed &&
	    !d->frag.nfindings)
		return;
	printf("  diagnosis:\n");
	/* the findings first: each is a cause with its figure and what to do */
	for (uint32_t i = 0; i < d->frag.nfindings; i++)
		printf("    %s: %s: %s\n", d->frag.findings[i].name, d->frag.findings[i].text,
		       d->frag.findings[i].advice);
	if (d->post_mortem.killed) {
		const struct mt_post_mortem *pm = &d->post_mortem;
		mt_size_text(b1, sizeof(b1), p->kind[MT_KIND_HOST].leaked_bytes);
		if (pm->have_sample && pm->cgroup_max) {
			mt_size_text(b2, sizeof(b2), pm->last_rss);
			mt_size_text(b3, sizeof(b3), pm->cgroup_max);
			printf("    killed at %s RSS against a cgroup limit of %s", b2, b3);
			mt_size_text(b2, sizeof(b2), pm->cgroup_current);
			printf(" (memory.current %s); %s of heap live at death\n", b2, b1);
		} else if (pm->have_sample) {
			mt_size_text(b2, sizeof(b2), pm->last_rss);
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
	if (p->in->nmarks) {
		printf("    %u mark%s, the last \"", p->in->nmarks, p->in->nmarks == 1 ? "" : "s");
		mt_put_text(stdout, p->in->marks[p->in->nmarks - 1].label);
		puts("\"");
	}
	if (m->samples) {
		mt_size_text(b1, sizeof(b1), m->rss_peak);
		mt_size_text(b2, sizeof(b2), m->rss_last);
		printf("    RSS peak %s, last %s", b1, b2);
		if (m->pss_peak) {
			mt_size_text(b1, sizeof(b1), m->pss_peak);
			printf("; Pss peak %s", b1);
		}
		/* Private_Dirty is about 0 at the fork, when every page is shared with the
		 * parent: the last figure is what the worker copied, however late its
		 * first sample came (a busy machine delays it past the first copies) */
		if (m->private_dirty_last && p->in->origin == MT_ORIGIN_FORK) {
			mt_size_text(b1, sizeof(b1), m->private_dirty_last);
			mt_size_text(b2, sizeof(b2), m->private_dirty_first);
			printf("; copy-on-write: Private_Dirty %s since the fork (%s at the first "
			       "sample)",
			       b1, b2);
		}
		putchar('\n');
	}
}

static void print_text(struct mt_analysis *a, const char *file, unsigned top)
{
	struct mt_sym *syms = calloc(MAX_FRAMES, sizeof(*syms));
	char b1[32];

	if (!syms)
		return;
	fputs("memtrace report: ", stdout);
	mt_put_text(stdout, file);
	printf(": %u process%s, %" PRIu64 " events\n", a->nprocs, a->nprocs == 1 ? "" : "es",
	       a->events);
	mt_cmd_sampling_note(stdout, "", a);
	if (a->trace.header.ring_overflow) {
		mt_size_text(b1, sizeof(b1), a->trace.header.ring_overflow);
		printf("ring: the trace grew %s past its size (its consumer fell behind or "
		       "stopped); "
		       "no event was lost\n",
		       b1);
	}
	for (uint32_t i = 0; i < a->nprocs; i++) {
		const struct mt_process_result *p = &a->procs[i];
		const struct mt_instance *in = p->in;

		printf("\nprocess %u (ppid %u): ", in->pid, in->ppid);
		mt_put_text(stdout, mt_cmd_command(in));
		putchar('\n');
		if (in->window_start)
			printf("  ring: the window kept starts at %.3f s, at a keyframe; "
			       "allocations, "
			       "bytes, peak and leaks are all-time, sizes, temporaries and growth "
			       "of "
			       "the window\n",
			       (double)mt_analysis_since_start(a, in, in->window_start) / 1e9);
		switch (in->end) {
		case MT_END_KILLED:
			mt_size_text(b1, sizeof(b1), p->kind[MT_KIND_HOST].leaked_bytes);
			printf("  killed (no exit record): %s live at death", b1);
			if (p->kind[MT_KIND_MMAP].leaked_bytes) {
				mt_size_text(b1, sizeof(b1), p->kind[MT_KIND_MMAP].leaked_bytes);
				printf(", %s mmap", b1);
			}
			putchar('\n');
			break;
		case MT_END_EXIT:
			printf("  exited with status %u (%s)\n", in->exit_status,
			       mt_cmd_exit_how(in->exit_how));
			break;
		case MT_END_EXEC:
			printf("  replaced by exec\n");
			break;
		case MT_END_EXEC_UNTRACED:
			/* say why this process has no exit, and that it was not killed */
			fputs("  replaced by an untraced program ", stdout);
			mt_put_text(stdout, in->exec_path ? in->exec_path : "?");
			putchar('\n');
			printf("    (a program memtrace cannot enter, such as a static or setuid "
			       "one: the process was not killed, its figures end at the exec)\n");
			break;
		case MT_END_STOPPED:
			/* the capture could not go on (a full disk, ulimit -f, no address space):
			 * the program ran on, so this is no crash */
			printf("  tracing stopped: %s (errno %" PRId64 "); the program ran on, its "
			       "figures end there\n",
			       in->stopped_errno > 0 && in->stopped_errno < 4096
			               ? strerror((int)in->stopped_errno)
			               : "unknown error",
			       in->stopped_errno);
			break;
		case MT_END_RUNNING:
			printf("  still running: the figures are those of the trace so far\n");
			break;
		case MT_END_CUT:
			printf("  end unknown: the trace file was cut, and this process's end may "
			       "be "
			       "in what is missing\n");
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
		mt_size_text(b1, sizeof(b1), a->tree.combined_rss_peak);
		if (a->tree.pss_known)
			mt_size_text(b2, sizeof(b2), a->tree.combined_pss_peak);
		else /* forks came faster than the processes read their Pss */
			snprintf(b2, sizeof(b2), "unknown");
		printf("\nprocess tree: %u processes, combined peak RSS %s (at %.3f s), Pss %s\n",
		       a->tree.processes, b1, (double)a->tree.time_ns / 1e9, b2);
	}
	free(syms);
}

static void usage(FILE *f)
{
	fputs("usage: memtrace report [--top N] [--json] [--native] FILE [FILE...]\n"
	      "  Several traces (one per rank of a job) are put side by side: the peak per\n"
	      "  trace and kind, which failed an allocation or was killed first, and the\n"
	      "  stacks whose bytes at the peak differ most (docs/ranks.md).\n"
	      "  --native keeps every native stack apart instead of grouping by the Python stack.\n"
	      "  A stack is named by its first frame outside allocation plumbing; add your own\n"
	      "  plumbing as MEMTRACE_PLUMBING='PATTERN:PATTERN' (docs/labels.md).\n",
	      f);
}

int mt_cmd_report(int argc, char **argv)
{
	char **files = argv; /* the traces, gathered at the front of argv as they come */
	const char *file;
	uint32_t nfiles = 0;
	unsigned long top = 5;
	bool json = false, native = false;
	struct mt_analysis *a;
	int status;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--native")) {
			native = true;
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
		} else {
			files[nfiles++] = argv[i];
		}
	}
	if (!nfiles) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	if (nfiles > 1)
		return mt_report_ranks(files, nfiles, (unsigned)top, json, native);
	file = files[0];
	status = mt_cmd_analyze(file, &mt_cmd_frames, native, &a);
	if (status != MT_EXIT_OK)
		return status;
	mt_analysis_drop_stack_rows(a);
	if (json) {
		json_t *root = mt_report_json(a, file, (unsigned)top);
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
