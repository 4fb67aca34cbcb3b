/* SPDX-License-Identifier: MIT */
/*
 * memtrace diff BASE NEW: per program, memory kind and stack, how the peak,
 * the leaked bytes and the bytes allocated changed between two traces of
 * the same program (docs/diff.md); as text or `--json`; and a CI gate,
 * --fail-on-increase PCT (a peak) and --fail-on-leak-increase BYTES, with
 * check's exit statuses: 0 the gate holds (or none was asked for), 1 it
 * fails, 2 a trace cannot be read or cannot support a verdict (cut,
 * damaged, still written, tracing stopped), or the command line is wrong.
 *
 * May not: compute figures (analysis.c does) or match stacks (diff-match.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "diff-match.h"
#include "report-json.h"
#include <memtrace/bytes.h>

#define MAX_FRAMES        512
#define EXIT_GATE_FAILED  1
#define EXIT_CANNOT_CHECK 2

struct options {
	const char *file[2];
	bool json, native;
	unsigned top;
	enum mt_diff_lines lines;
	bool counted[MT_LEAK_CLASS_COUNT];
	bool gate_peak, gate_leak;
	double max_percent;
	uint64_t max_leak_increase;
};

static void usage(FILE *f)
{
	fputs("usage: memtrace diff [--json] [--top N] [--lines python|all|none] [--native]\n"
	      "                     [--count-possible] [--count-reachable]\n"
	      "                     [--fail-on-increase PCT] [--fail-on-leak-increase BYTES]\n"
	      "                     BASE NEW\n"
	      "  Per program (executable name), memory kind and stack: the change of the peak,\n"
	      "  of the bytes leaked (as check counts them) and of the bytes allocated.\n"
	      "  Stacks are matched by their frames' functions and files; --lines says whose\n"
	      "  line numbers count too: Python frames' (python, the default), all or none.\n"
	      "  --fail-on-increase: exit 1 when a program's peak of a kind grew by more than\n"
	      "  PCT percent; --fail-on-leak-increase: when its leaked bytes grew by more than\n"
	      "  BYTES (K, M, G suffixes). Exit 2 when a trace cannot be read or cannot support\n"
	      "  a verdict (cut, damaged, still being written, tracing stopped).\n",
	      f);
}

static int parse_percent(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= 0) || isinf(v))
		return -EINVAL;
	*out = v;
	return 0;
}

/* 0, or the exit status; -1 after --help. */
static int parse_args(int argc, char **argv, struct options *o)
{
	int nfiles = 0;

	o->counted[MT_LEAK_DEFINITE] = o->counted[MT_LEAK_INDIRECT] = true;
	o->counted[MT_LEAK_UNCLASSIFIED] = true;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--native")) {
			o->native = true;
		} else if (!strcmp(a, "--count-possible")) {
			o->counted[MT_LEAK_POSSIBLE] = true;
		} else if (!strcmp(a, "--count-reachable")) {
			o->counted[MT_LEAK_REACHABLE] = true;
		} else if (!strcmp(a, "--top") && more) {
			if (mt_cmd_parse_top("diff", argv[++i], &o->top) < 0)
				return EXIT_CANNOT_CHECK;
		} else if (!strcmp(a, "--lines") && more) {
			a = argv[++i];
			if (!strcmp(a, "python"))
				o->lines = MT_DIFF_LINES_PYTHON;
			else if (!strcmp(a, "all"))
				o->lines = MT_DIFF_LINES_ALL;
			else if (!strcmp(a, "none"))
				o->lines = MT_DIFF_LINES_NONE;
			else {
				fprintf(stderr,
				        "memtrace diff: --lines wants python, all or none, not "
				        "%s\n",
				        a);
				return EXIT_CANNOT_CHECK;
			}
		} else if (!strcmp(a, "--fail-on-increase") && more) {
			if (parse_percent(argv[++i], &o->max_percent) < 0) {
				fprintf(stderr,
				        "memtrace diff: --fail-on-increase wants a percentage, "
				        "not %s\n",
				        argv[i]);
				return EXIT_CANNOT_CHECK;
			}
			o->gate_peak = true;
		} else if (!strcmp(a, "--fail-on-leak-increase") && more) {
			if (mt_parse_bytes(argv[++i], &o->max_leak_increase) < 0) {
				fprintf(stderr,
				        "memtrace diff: --fail-on-leak-increase wants BYTES (K, M, "
				        "G "
				        "suffixes), not %s\n",
				        argv[i]);
				return EXIT_CANNOT_CHECK;
			}
			o->gate_leak = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return -1;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "memtrace diff: unknown option %s\n", a);
			usage(stderr);
			return EXIT_CANNOT_CHECK;
		} else if (nfiles == 2) {
			fprintf(stderr, "memtrace diff: two traces, BASE and NEW\n");
			return EXIT_CANNOT_CHECK;
		} else {
			o->file[nfiles++] = a;
		}
	}
	if (nfiles != 2) {
		usage(stderr);
		return EXIT_CANNOT_CHECK;
	}
	return 0;
}

static int64_t change(uint64_t base, uint64_t new_)
{
	return (int64_t)(new_ - base);
}

static uint64_t magnitude(int64_t v)
{
	return v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
}

/* A stack's changes of the peak, the leaked and the allocated bytes, in that order. */
static void changes(const struct mt_diff_stack *s, uint64_t out[3])
{
	const struct mt_diff_figures *b = &s->side[MT_DIFF_BASE], *n = &s->side[MT_DIFF_NEW];

	out[0] = magnitude(change(b->peak_bytes, n->peak_bytes));
	out[1] = magnitude(change(b->leaked_bytes, n->leaked_bytes));
	out[2] = magnitude(change(b->bytes_allocated, n->bytes_allocated));
}

/* Stacks by the largest change of the peak, then of the leaked, then of the allocated bytes. */
static int cmp_stack(const void *pa, const void *pb)
{
	uint64_t x[3], y[3];

	changes(pa, x);
	changes(pb, y);
	for (int i = 0; i < 3; i++)
		if (x[i] != y[i])
			return x[i] > y[i] ? -1 : 1;
	return 0;
}

static bool changed(const struct mt_diff_stack *s)
{
	return memcmp(&s->side[MT_DIFF_BASE], &s->side[MT_DIFF_NEW], sizeof(s->side[0])) != 0;
}

static const char *status_of(const struct mt_diff_stack *s)
{
	if (!s->in[MT_DIFF_BASE])
		return "new";
	if (!s->in[MT_DIFF_NEW])
		return "gone";
	return changed(s) ? "changed" : "same";
}

/* "+1.00 MiB", "-300 B", "0 B" */
static void signed_size(char *buf, size_t n, int64_t v)
{
	char size[32];

	mt_size_text(size, sizeof(size), magnitude(v));
	snprintf(buf, n, "%s%s", v > 0 ? "+" : v < 0 ? "-" : "", size);
}

/* The peak's change in percent of BASE's; NAN when BASE held nothing. */
static double percent(uint64_t base, uint64_t new_)
{
	if (!base)
		return new_ ? NAN : 0;
	return 100.0 * ((double)new_ - (double)base) / (double)base;
}

struct gate {
	unsigned failures;
	json_t *list; /* the failures, for --json */
};

/* A gate failed: a line of text, or an object of the JSON's list. */
static void failed(const struct options *o, const struct mt_diff_group *g, struct gate *gate,
                   const char *figure, uint64_t base, uint64_t new_, const char *why)
{
	json_t *f;

	gate->failures++;
	if (!o->json) {
		printf("memtrace diff: ");
		mt_put_text(stdout, g->program);
		printf(" %s %s\n", mt_kind_name(g->kind), why);
		return;
	}
	f = json_object();
	json_object_set_new(f, "program", mt_json_text(g->program));
	json_object_set_new(f, "kind", json_string(mt_kind_name(g->kind)));
	json_object_set_new(f, "figure", json_string(figure));
	json_object_set_new(f, "base", mt_json_u64(base));
	json_object_set_new(f, "new", mt_json_u64(new_));
	if (!strcmp(figure, "peak_bytes"))
		json_object_set_new(f, "limit_percent", json_real(o->max_percent));
	else
		json_object_set_new(f, "limit_bytes", mt_json_u64(o->max_leak_increase));
	json_array_append_new(gate->list, f);
}

/* The gates on one program and kind. */
static void judge(const struct options *o, const struct mt_diff_group *g, struct gate *gate)
{
	const struct mt_diff_figures *b = &g->total[MT_DIFF_BASE], *n = &g->total[MT_DIFF_NEW];
	double pct = percent(b->peak_bytes, n->peak_bytes);
	char b1[32], b2[32], b3[32], why[160];

	if (o->gate_peak && n->peak_bytes > b->peak_bytes && (isnan(pct) || pct > o->max_percent)) {
		mt_size_text(b1, sizeof(b1), b->peak_bytes);
		mt_size_text(b2, sizeof(b2), n->peak_bytes);
		if (isnan(pct))
			snprintf(why, sizeof(why), "peak %s -> %s, from nothing, more than %g%%",
			         b1, b2, o->max_percent);
		else
			snprintf(why, sizeof(why), "peak %s -> %s, +%.1f%%, more than %g%%", b1, b2,
			         pct, o->max_percent);
		failed(o, g, gate, "peak_bytes", b->peak_bytes, n->peak_bytes, why);
	}
	if (o->gate_leak && n->leaked_bytes > b->leaked_bytes &&
	    n->leaked_bytes - b->leaked_bytes > o->max_leak_increase) {
		mt_size_text(b1, sizeof(b1), b->leaked_bytes);
		mt_size_text(b2, sizeof(b2), n->leaked_bytes);
		mt_size_text(b3, sizeof(b3), o->max_leak_increase);
		snprintf(why, sizeof(why), "leaked %s -> %s, more than %s more", b1, b2, b3);
		failed(o, g, gate, "leaked_bytes", b->leaked_bytes, n->leaked_bytes, why);
	}
}

/* ---- text ---- */

static void text_figure(const char *name, uint64_t base, uint64_t new_, bool pct)
{
	char b1[32], b2[32], d[40];
	double p = percent(base, new_);

	mt_size_text(b1, sizeof(b1), base);
	mt_size_text(b2, sizeof(b2), new_);
	signed_size(d, sizeof(d), change(base, new_));
	printf("  %-10s %12s -> %-12s %s", name, b1, b2, d);
	if (pct && base != new_) {
		if (isnan(p))
			printf(" (from nothing)");
		else
			printf(" (%+.1f%%)", p);
	}
	putchar('\n');
}

static void text_stack(struct mt_sym *syms, const struct mt_diff_stack *s)
{
	const struct mt_diff_figures *b = &s->side[MT_DIFF_BASE], *n = &s->side[MT_DIFF_NEW];
	char d[3][40], label[1024];
	int nf = s->a ? mt_analysis_frames(s->a, s->stack_instance, s->stack, syms, MAX_FRAMES) : 0;

	signed_size(d[0], sizeof(d[0]), change(b->peak_bytes, n->peak_bytes));
	signed_size(d[1], sizeof(d[1]), change(b->leaked_bytes, n->leaked_bytes));
	signed_size(d[2], sizeof(d[2]), change(b->bytes_allocated, n->bytes_allocated));
	if (nf > 0)
		mt_cmd_label_text(label, sizeof(label), syms, nf);
	else
		snprintf(label, sizeof(label), "[no stack]");
	printf("  %12s %12s %12s  %s", d[0], d[1], d[2], label);
	if (strcmp(status_of(s), "changed"))
		printf(" (%s)", status_of(s));
	putchar('\n');
}

static void text_group(const struct options *o, struct mt_sym *syms, const struct mt_diff_group *g,
                       struct mt_diff_stack *sorted, size_t n)
{
	const struct mt_diff_figures *b = &g->total[MT_DIFF_BASE], *nw = &g->total[MT_DIFF_NEW];
	static const struct mt_diff_figures none;
	size_t shown = 0, moved = 0;

	/* a kind neither trace used (mmap in many programs) */
	char b1[32], b2[32], b3[32];

	if (!memcmp(b, &none, sizeof(none)) && !memcmp(nw, &none, sizeof(none)))
		return;
	for (size_t i = 0; i < n; i++)
		moved += changed(&sorted[i]);
	mt_put_text(stdout, g->program);
	printf(", %s (%" PRIu32 " -> %" PRIu32 " process%s):", mt_kind_name(g->kind),
	       g->processes[MT_DIFF_BASE], g->processes[MT_DIFF_NEW],
	       g->processes[MT_DIFF_NEW] == 1 ? "" : "es");
	if (!moved) {
		mt_size_text(b1, sizeof(b1), nw->peak_bytes);
		mt_size_text(b2, sizeof(b2), nw->leaked_bytes);
		mt_size_text(b3, sizeof(b3), nw->bytes_allocated);
		printf(" no change (peak %s, leaked %s, allocated %s)\n", b1, b2, b3);
		return;
	}
	putchar('\n');
	text_figure("peak", b->peak_bytes, nw->peak_bytes, true);
	text_figure("leaked", b->leaked_bytes, nw->leaked_bytes, false);
	text_figure("allocated", b->bytes_allocated, nw->bytes_allocated, true);
	printf("  %12s %12s %12s  stack\n", "peak", "leaked", "allocated");
	for (size_t i = 0; i < n && shown < o->top; i++) {
		if (!changed(&sorted[i]))
			continue;
		text_stack(syms, &sorted[i]);
		shown++;
	}
	if (moved > shown)
		printf("  ... %zu more stacks changed (--top)\n", moved - shown);
	putchar('\n');
}

/* ---- JSON ---- */

static json_t *figures_json(const struct mt_diff_figures *f)
{
	json_t *o = json_object();

	json_object_set_new(o, "peak_bytes", mt_json_u64(f->peak_bytes));
	json_object_set_new(o, "leaked_bytes", mt_json_u64(f->leaked_bytes));
	json_object_set_new(o, "bytes_allocated", mt_json_u64(f->bytes_allocated));
	json_object_set_new(o, "allocations", mt_json_u64(f->allocations));
	return o;
}

static json_t *change_json(const struct mt_diff_figures *b, const struct mt_diff_figures *n)
{
	json_t *o = json_object();
	double p = percent(b->peak_bytes, n->peak_bytes);

	json_object_set_new(o, "peak_bytes", json_integer(change(b->peak_bytes, n->peak_bytes)));
	json_object_set_new(o, "leaked_bytes",
	                    json_integer(change(b->leaked_bytes, n->leaked_bytes)));
	json_object_set_new(o, "bytes_allocated",
	                    json_integer(change(b->bytes_allocated, n->bytes_allocated)));
	json_object_set_new(o, "allocations", json_integer(change(b->allocations, n->allocations)));
	json_object_set_new(o, "peak_percent", isnan(p) ? json_null() : json_real(p));
	return o;
}

static json_t *stack_json(struct mt_sym *syms, const struct mt_diff_stack *s)
{
	json_t *o = json_object();
	char label[1024];
	int nf = 0;

	json_object_set_new(o, "status", json_string(status_of(s)));
	json_object_set_new(o, "base", figures_json(&s->side[MT_DIFF_BASE]));
	json_object_set_new(o, "new", figures_json(&s->side[MT_DIFF_NEW]));
	json_object_set_new(o, "change",
	                    change_json(&s->side[MT_DIFF_BASE], &s->side[MT_DIFF_NEW]));
	json_object_set_new(o, "frames",
	                    s->a ? mt_json_frames(s->a, syms, s->stack_instance, s->stack, &nf)
	                         : json_array());
	if (nf > 0)
		mt_cmd_label_text(label, sizeof(label), syms, nf);
	/* the label is text already escaped, as the report prints it */
	json_object_set_new(o, "label", json_string(nf > 0 ? label : "[no stack]"));
	return o;
}

static json_t *group_json(const struct options *o, struct mt_sym *syms,
                          const struct mt_diff_group *g, struct mt_diff_stack *sorted, size_t n)
{
	json_t *j = json_object(), *stacks = json_array();
	size_t moved = 0;

	json_object_set_new(j, "program", mt_json_text(g->program));
	json_object_set_new(j, "kind", json_string(mt_kind_name(g->kind)));
	json_object_set_new(j, "processes_base", json_integer(g->processes[MT_DIFF_BASE]));
	json_object_set_new(j, "processes_new", json_integer(g->processes[MT_DIFF_NEW]));
	json_object_set_new(j, "base", figures_json(&g->total[MT_DIFF_BASE]));
	json_object_set_new(j, "new", figures_json(&g->total[MT_DIFF_NEW]));
	json_object_set_new(j, "change",
	                    change_json(&g->total[MT_DIFF_BASE], &g->total[MT_DIFF_NEW]));
	for (size_t i = 0; i < n; i++) {
		if (!changed(&sorted[i]))
			continue;
		if (moved++ < o->top)
			json_array_append_new(stacks, stack_json(syms, &sorted[i]));
	}
	json_object_set_new(j, "stacks", stacks);
	json_object_set_new(j, "stacks_changed", mt_json_u64(moved));
	json_object_set_new(j, "stacks_total", mt_json_u64(n));
	return j;
}

static const char *lines_name(enum mt_diff_lines l)
{
	return l == MT_DIFF_LINES_ALL ? "all" : l == MT_DIFF_LINES_NONE ? "none" : "python";
}

/* Every group, as text or into root; the gates judged. */
static int show(const struct options *o, struct mt_diff *d, json_t *root, struct gate *gate)
{
	struct mt_sym *syms = calloc(MAX_FRAMES, sizeof(*syms));
	json_t *groups = json_array();

	if (!syms)
		return -ENOMEM;
	for (size_t i = 0; i < d->ngroups; i++) {
		const struct mt_diff_group *g = &d->groups[i];
		struct mt_diff_stack *sorted =
		        malloc((g->nstacks ? g->nstacks : 1) * sizeof(*sorted));
		if (!sorted) {
			free(syms);
			json_decref(groups);
			return -ENOMEM;
		}
		memcpy(sorted, g->stacks, g->nstacks * sizeof(*sorted));
		qsort(sorted, g->nstacks, sizeof(*sorted), cmp_stack);
		if (o->json)
			json_array_append_new(groups, group_json(o, syms, g, sorted, g->nstacks));
		else
			text_group(o, syms, g, sorted, g->nstacks);
		free(sorted);
	}
	for (size_t i = 0; i < d->ngroups; i++)
		if (o->gate_peak || o->gate_leak)
			judge(o, &d->groups[i], gate);
	json_object_set_new(root, "programs", groups);
	free(syms);
	return 0;
}

int mt_cmd_diff(int argc, char **argv)
{
	struct options o = {.top = 10};
	struct mt_analysis *a[2] = {NULL, NULL};
	struct mt_diff d = {0};
	struct gate gate = {0};
	json_t *root = json_object();
	int status = parse_args(argc, argv, &o), r;
	bool gated;
	char whybuf[160];

	if (status < 0) {
		status = MT_EXIT_OK;
		goto out;
	}
	if (status)
		goto out;
	status = EXIT_CANNOT_CHECK;
	gated = o.gate_peak || o.gate_leak;
	for (int s = 0; s < 2; s++) {
		const char *why;
		if (mt_cmd_analyze(o.file[s], &mt_cmd_frames, o.native, &a[s]) != MT_EXIT_OK)
			goto out; /* the one-line error is printed */
		why = mt_cmd_no_verdict(a[s], false, whybuf, sizeof(whybuf));
		if (why && gated) {
			printf("memtrace diff: no verdict: %s: %s\n", o.file[s], why);
			goto out;
		}
		if (why)
			fprintf(stderr, "memtrace diff: %s: %s\n", o.file[s], why);
	}
	r = mt_diff_build(&d, a[MT_DIFF_BASE], a[MT_DIFF_NEW], o.lines, o.counted);
	if (r < 0) {
		fprintf(stderr, "memtrace diff: %s\n", strerror(-r));
		goto out;
	}
	gate.list = json_array();
	json_object_set_new(root, "memtrace_diff", json_integer(1));
	json_object_set_new(root, "base", mt_json_text(o.file[0]));
	json_object_set_new(root, "new", mt_json_text(o.file[1]));
	json_object_set_new(root, "lines", json_string(lines_name(o.lines)));
	if (!o.json) {
		printf("memtrace diff: ");
		mt_put_text(stdout, o.file[0]);
		printf(" -> ");
		mt_put_text(stdout, o.file[1]);
		printf("\n\n");
		for (int s = 0; s < 2; s++)
			mt_cmd_sampling_note(
			        stdout, s ? "memtrace diff: NEW: " : "memtrace diff: BASE: ", a[s]);
	} else {
		for (int s = 0; s < 2; s++)
			mt_cmd_sampling_note(
			        stderr, s ? "memtrace diff: NEW: " : "memtrace diff: BASE: ", a[s]);
	}
	if ((r = show(&o, &d, root, &gate)) < 0) {
		fprintf(stderr, "memtrace diff: %s\n", strerror(-r));
		goto out;
	}
	status = gate.failures ? EXIT_GATE_FAILED : MT_EXIT_OK;
	if (o.json) {
		json_t *g = json_null();
		bool sampled = false;
		for (int s = 0; s < 2; s++)
			for (uint32_t i = 0; i < a[s]->nprocs; i++)
				sampled |= a[s]->procs[i].in->sampling != 0;
		json_object_set_new(root, "estimates", json_boolean(sampled));
		if (gated) {
			g = json_object();
			json_object_set_new(g, "passed", json_boolean(!gate.failures));
			json_object_set_new(g, "failures", json_incref(gate.list));
		}
		json_object_set_new(root, "gate", g);
		if (json_dumpf(root, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER) < 0) {
			status = EXIT_CANNOT_CHECK;
			goto out;
		}
		putchar('\n');
	} else if (gated) {
		if (gate.failures)
			printf("memtrace diff: FAILED (%u limit%s exceeded)\n", gate.failures,
			       gate.failures == 1 ? "" : "s");
		else
			printf("memtrace diff: ok\n");
	}
out:
	json_decref(gate.list);
	json_decref(root);
	mt_diff_free(&d);
	mt_analysis_free(a[0]);
	mt_analysis_free(a[1]);
	return status;
}
