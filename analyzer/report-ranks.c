/* SPDX-License-Identifier: MIT */
/*
 * `memtrace report A B C...`: the traces of a multi-process job side by
 * side (ranks.h, docs/ranks.md), as text or as one JSON object.
 *
 * May not: compute figures (ranks.c and analysis.c do).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ranks.h"
#include "report-json.h"

#define TEXT_FRAMES 5

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

/* "exit 0", "killed", ...: how the rank's own process ended */
static void end_text(char *buf, size_t n, const struct mt_rank *r)
{
	if (r->end == MT_END_EXIT)
		snprintf(buf, n, "exit %" PRIu32, r->exit_status);
	else
		snprintf(buf, n, "%s", mt_end_name(r->end));
}

static void trouble_text(char *buf, size_t n, const struct mt_rank_trouble *t)
{
	char size[32], live[32], err[32];
	const char *fn = mt_fn_name(t->fail.fn);

	mt_size_text(live, sizeof(live), t->live_bytes);
	if (t->killed) {
		snprintf(buf, n, "killed, %s of host live at death", live);
		return;
	}
	mt_size_text(size, sizeof(size), t->fail.size);
	if (t->fail.kind >= MT_KIND_CUDA_HOST)
		snprintf(err, sizeof(err), "CUDA error %" PRIu32, t->fail.err);
	else if (t->fail.err == ENOMEM)
		snprintf(err, sizeof(err), "ENOMEM");
	else
		snprintf(err, sizeof(err), "errno %" PRIu32, t->fail.err);
	snprintf(buf, n, "%s of %s failed (%s), %s of %s live", fn ? fn : "?", size, err, live,
	         mt_kind_name(t->fail.kind));
}

static bool kind_shown(const struct mt_ranks *r, int k)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->rank[i].shown[k])
			return true;
	return false;
}

static void print_row(const char *name, int width, const struct mt_ranks *r,
                      void (*cell)(char *buf, size_t n, const struct mt_rank *rank, int k), int k)
{
	char buf[64];

	printf("  %-18s", name);
	for (uint32_t i = 0; i < r->n; i++) {
		cell(buf, sizeof(buf), &r->rank[i], k);
		printf("  %-*s", width, buf);
	}
	putchar('\n');
}

static void cell_pid(char *buf, size_t n, const struct mt_rank *rank, int k)
{
	(void)k;
	snprintf(buf, n, "%" PRIu32, rank->pid);
}

static void cell_end(char *buf, size_t n, const struct mt_rank *rank, int k)
{
	(void)k;
	end_text(buf, n, rank);
}

static void cell_processes(char *buf, size_t n, const struct mt_rank *rank, int k)
{
	(void)k;
	snprintf(buf, n, "%" PRIu32, rank->processes);
}

static void cell_peak(char *buf, size_t n, const struct mt_rank *rank, int k)
{
	mt_size_text(buf, n, rank->kind[k].peak_bytes);
}

static void cell_failed(char *buf, size_t n, const struct mt_rank *rank, int k)
{
	snprintf(buf, n, "%" PRIu64, rank->failed[k]);
}

static void print_text(const struct mt_ranks *r, unsigned top)
{
	uint32_t *order = calloc(r->n ? r->n : 1, sizeof(*order)), ntrouble;
	uint64_t start = mt_ranks_start(r);
	int width = 12;
	char name[64], buf[256];
	size_t shown = 0;

	if (!order)
		return;
	for (uint32_t i = 0; i < r->n; i++)
		if ((int)strlen(base_name(r->rank[i].file)) > width)
			width = (int)strlen(base_name(r->rank[i].file));
	printf("memtrace report: %u traces side by side (each trace's first process)\n", r->n);
	for (uint32_t i = 0; i < r->n; i++)
		if (r->rank[i].sampling) {
			printf("sampled capture: host figures are estimates (docs/sampling.md)\n");
			break;
		}
	putchar('\n');
	printf("  %-18s", "");
	for (uint32_t i = 0; i < r->n; i++) {
		fputs("  ", stdout);
		mt_put_text(stdout, base_name(r->rank[i].file));
		printf("%*s", width - (int)strlen(base_name(r->rank[i].file)), "");
	}
	putchar('\n');
	print_row("pid", width, r, cell_pid, 0);
	print_row("end", width, r, cell_end, 0);
	print_row("processes", width, r, cell_processes, 0);
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		if (!kind_shown(r, k))
			continue;
		snprintf(name, sizeof(name), "%s peak", mt_kind_name((unsigned)k));
		print_row(name, width, r, cell_peak, k);
	}
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		bool any = false;
		for (uint32_t i = 0; i < r->n; i++)
			any |= r->rank[i].failed[k] != 0;
		if (!any)
			continue;
		snprintf(name, sizeof(name), "%s failed", mt_kind_name((unsigned)k));
		print_row(name, width, r, cell_failed, k);
	}
	ntrouble = mt_ranks_trouble_order(r, order);
	if (ntrouble) {
		printf("\ntrouble, earliest first (seconds from the earliest trace's start):\n");
		for (uint32_t j = 0; j < ntrouble; j++) {
			const struct mt_rank *rank = &r->rank[order[j]];
			trouble_text(buf, sizeof(buf), &rank->trouble);
			printf("  %s+%.3f s  ", j ? "" : "first: ",
			       (double)(rank->trouble.realtime_ns - start) / 1e9);
			mt_put_text(stdout, base_name(rank->file));
			printf(" (process %" PRIu32 "): %s\n", rank->trouble.pid, buf);
		}
	} else {
		printf("\nno failed allocation, no process killed\n");
	}
	for (size_t i = 0; i < r->nstacks && shown < top; i++) {
		const struct mt_rank_stack *s = &r->stacks[i];
		const char *line = s->key;
		if (!s->spread)
			break;
		if (!shown++)
			printf("\nstacks whose bytes at the peak differ most between the "
			       "traces:\n");
		mt_size_text(buf, sizeof(buf), s->spread);
		printf("  %s, %s apart:", mt_kind_name(s->kind), buf);
		for (uint32_t k = 0; k < r->n; k++) {
			mt_size_text(buf, sizeof(buf), s->peak[k]);
			printf("%s %s", k ? " |" : "", buf);
		}
		fputs(" by ", stdout);
		mt_put_text(stdout, s->label);
		putchar('\n');
		for (int f = 0; f < TEXT_FRAMES && *line; f++) {
			const char *end = strchr(line, '\n');
			printf("      %.*s\n", (int)(end - line), line);
			line = end + 1;
		}
	}
	if (!shown)
		printf("\nno stack's bytes at the peak differ between the traces\n");
	free(order);
}

static json_t *trouble_json(const struct mt_rank_trouble *t, uint64_t start)
{
	json_t *o;
	const char *fn = mt_fn_name(t->fail.fn);

	if (!t->any)
		return json_null();
	o = json_object();
	json_object_set_new(o, "what", json_string(t->killed ? "killed" : "failed"));
	json_object_set_new(o, "pid", json_integer(t->pid));
	json_object_set_new(o, "command", mt_json_text(t->command));
	json_object_set_new(o, "time_ns", mt_json_u64(t->realtime_ns - start));
	json_object_set_new(o, "realtime_ns", mt_json_u64(t->realtime_ns));
	json_object_set_new(o, "live_bytes", mt_json_u64(t->live_bytes));
	json_object_set_new(o, "function", t->killed || !fn ? json_null() : json_string(fn));
	json_object_set_new(o, "size", t->killed ? json_null() : mt_json_u64(t->fail.size));
	json_object_set_new(o, "error", t->killed ? json_null() : json_integer(t->fail.err));
	json_object_set_new(o, "kind",
	                    t->killed ? json_null() : json_string(mt_kind_name(t->fail.kind)));
	return o;
}

static json_t *rank_json(const struct mt_ranks *r, const struct mt_rank *rank, uint64_t start)
{
	json_t *o = json_object(), *kinds = json_object();

	json_object_set_new(o, "file", mt_json_text(rank->file));
	json_object_set_new(o, "pid", json_integer(rank->pid));
	json_object_set_new(o, "command", mt_json_text(rank->command));
	json_object_set_new(o, "processes", json_integer(rank->processes));
	json_object_set_new(o, "end", json_string(mt_end_name(rank->end)));
	json_object_set_new(o, "exit_status",
	                    rank->end == MT_END_EXIT ? json_integer(rank->exit_status)
	                                             : json_null());
	json_object_set_new(o, "sampled", json_boolean(rank->sampling != 0));
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		json_t *kj;
		if (!kind_shown(r, k))
			continue;
		kj = json_object();
		json_object_set_new(kj, "peak_bytes", mt_json_u64(rank->kind[k].peak_bytes));
		json_object_set_new(kj, "peak_blocks", mt_json_u64(rank->kind[k].peak_blocks));
		json_object_set_new(kj, "failed_allocations", mt_json_u64(rank->failed[k]));
		json_object_set_new(kinds, mt_kind_name((unsigned)k), kj);
	}
	json_object_set_new(o, "memories", kinds);
	json_object_set_new(o, "trouble", trouble_json(&rank->trouble, start));
	return o;
}

static json_t *stack_json(const struct mt_ranks *r, const struct mt_rank_stack *s)
{
	json_t *o = json_object(), *frames = json_array(), *peaks = json_array();
	const char *line = s->key;

	json_object_set_new(o, "kind", json_string(mt_kind_name(s->kind)));
	json_object_set_new(o, "label", mt_json_text(s->label));
	while (*line) {
		const char *end = strchr(line, '\n');
		char *text = strndup(line, (size_t)(end - line));
		json_array_append_new(frames, mt_json_text(text));
		free(text);
		line = end + 1;
	}
	json_object_set_new(o, "frames", frames);
	for (uint32_t k = 0; k < r->n; k++)
		json_array_append_new(peaks, mt_json_u64(s->peak[k]));
	json_object_set_new(o, "peak_bytes", peaks);
	json_object_set_new(o, "spread_bytes", mt_json_u64(s->spread));
	return o;
}

static json_t *ranks_json(const struct mt_ranks *r, unsigned top)
{
	json_t *root = json_object(), *traces = json_array(), *first = json_array(),
	       *stacks = json_array();
	uint32_t *order = calloc(r->n ? r->n : 1, sizeof(*order)), n;
	uint64_t start = mt_ranks_start(r);

	for (uint32_t i = 0; i < r->n; i++)
		json_array_append_new(traces, rank_json(r, &r->rank[i], start));
	n = order ? mt_ranks_trouble_order(r, order) : 0;
	for (uint32_t j = 0; j < n; j++)
		json_array_append_new(first, json_integer(order[j]));
	for (size_t i = 0; i < r->nstacks && i < top && r->stacks[i].spread; i++)
		json_array_append_new(stacks, stack_json(r, &r->stacks[i]));
	json_object_set_new(root, "traces", traces);
	json_object_set_new(root, "start_realtime_ns", mt_json_u64(start));
	json_object_set_new(root, "trouble_order", first);
	json_object_set_new(root, "differing_stacks", stacks);
	free(order);
	return root;
}

int mt_report_ranks(char **files, uint32_t n, unsigned top, bool json, bool native)
{
	struct mt_ranks r;
	int status = MT_EXIT_OK, ret;

	if (mt_ranks_init(&r, n) < 0) {
		fprintf(stderr, "memtrace report: out of memory\n");
		return MT_EXIT_BAD_TRACE;
	}
	for (uint32_t i = 0; i < n && status == MT_EXIT_OK; i++) {
		struct mt_analysis *a;
		status = mt_cmd_analyze(files[i], &mt_cmd_frames, native, &a);
		if (status != MT_EXIT_OK)
			break;
		ret = a->nprocs ? mt_ranks_add(&r, a, files[i]) : -EINVAL;
		if (ret < 0) {
			fprintf(stderr, "memtrace report: %s: %s\n", files[i],
			        ret == -EINVAL ? "the trace holds no process" : strerror(-ret));
			status = MT_EXIT_BAD_TRACE;
		}
		mt_analysis_free(a);
	}
	if (status == MT_EXIT_OK) {
		mt_ranks_finish(&r);
		if (json) {
			json_t *root = ranks_json(&r, top);
			if (json_dumpf(root, stdout, JSON_INDENT(1)) < 0)
				status = MT_EXIT_BAD_TRACE;
			putchar('\n');
			json_decref(root);
		} else {
			print_text(&r, top);
		}
	}
	mt_ranks_free(&r);
	return status;
}
