/* SPDX-License-Identifier: MIT */
/*
 * memtrace check: the CI gate. Every process of the trace and every memory
 * kind on its own (bytes of two kinds are never added): the bytes leaked
 * (live at exit, or at death for a killed process) outside suppressed
 * stacks may not exceed --max-leaked, 0 by default as LeakSanitizer fails
 * on any leak; the peak may not exceed --max-peak, unlimited by default.
 *
 * Leaked bytes are those of the classes counted (reach.h): definite and
 * indirect, as LeakSanitizer, and unclassified, what no scan judged (a
 * killed process's blocks, a GPU kind's), so that a gate never passes on
 * what it could not see; --count-possible and --count-reachable add those
 * classes (the latter: every live block).
 *
 * Suppressions are LeakSanitizer's: `leak:PATTERN` lines, `#` comments. A
 * pattern matches a frame when it matches its function, its source file
 * or its module path: `*` is any run of characters, a leading `^` and a
 * trailing `$` anchor it, and otherwise it may match anywhere. A leaking
 * stack is suppressed when any of its frames matches.
 *
 * With --from-mark A --to-mark B the leaked bytes are instead what each
 * stack kept between a process's first mark A and its next mark B (window.h),
 * unclassified; only the processes that made both marks are judged, and a
 * trace still being written may be judged once they are in it (the pytest
 * plugin checks its own running process so, docs/pytest.md).
 *
 * Exit status: 0 the gate holds, 1 it fails (the offending stacks are
 * printed, a line each), 2 the trace or the suppressions cannot be read,
 * or the command line is wrong (so that no mistake passes for a leak).
 *
 * May not: compute figures (analysis.c does).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "commands.h"
#include "window.h"
#include <memtrace/bytes.h>

#define MAX_FRAMES        512
#define SHOW_STACKS       5
#define SHOW_FRAMES       4
#define EXIT_GATE_FAILED  1
#define EXIT_CANNOT_CHECK 2

struct suppressions {
	char **pattern;
	size_t n, cap;
	uint64_t *hits; /* leaked bytes each pattern suppressed */
};

/* '*' globbing of p against s, from the start of s; `$` at the end of p anchors the end. */
static bool glob_here(const char *p, const char *s)
{
	for (; *p; p++, s++) {
		if (*p == '*') {
			while (*p == '*')
				p++;
			if (!*p)
				return true;
			for (; *s; s++)
				if (glob_here(p, s))
					return true;
			return glob_here(p, s);
		}
		if (*p == '$' && !p[1])
			return !*s;
		if (!*s || *p != *s)
			return false;
	}
	return true;
}

static bool pattern_matches(const char *p, const char *s)
{
	if (!s)
		return false;
	if (*p == '^')
		return glob_here(p + 1, s);
	for (const char *t = s;; t++) {
		if (glob_here(p, t))
			return true;
		if (!*t)
			return false;
	}
}

static int add_pattern(struct suppressions *sup, const char *p)
{
	if (sup->n == sup->cap) {
		size_t cap = sup->cap ? sup->cap * 2 : 16;
		void *q = realloc(sup->pattern, cap * sizeof(*sup->pattern));
		if (!q)
			return -ENOMEM;
		sup->pattern = q;
		sup->cap = cap;
	}
	sup->pattern[sup->n] = strdup(p);
	if (!sup->pattern[sup->n])
		return -ENOMEM;
	sup->n++;
	return 0;
}

static void free_suppressions(struct suppressions *sup)
{
	for (size_t i = 0; i < sup->n; i++)
		free(sup->pattern[i]);
	free(sup->pattern);
	free(sup->hits);
}

/* Prints its own error line; 0 or EXIT_CANNOT_CHECK. */
static int read_suppressions(struct suppressions *sup, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	unsigned lineno = 0;

	if (!f) {
		fprintf(stderr, "memtrace check: %s: %s\n", path, strerror(errno));
		return EXIT_CANNOT_CHECK;
	}
	while (fgets(line, sizeof(line), f)) {
		char *s = line, *e;
		lineno++;
		while (*s == ' ' || *s == '\t')
			s++;
		e = s + strlen(s);
		while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			*--e = 0;
		if (!*s || *s == '#')
			continue;
		if (strncmp(s, "leak:", 5) || !s[5]) {
			fprintf(stderr,
			        "memtrace check: %s: line %u: not a `leak:PATTERN` suppression: "
			        "%s\n",
			        path, lineno, s);
			fclose(f);
			return EXIT_CANNOT_CHECK;
		}
		if (add_pattern(sup, s + 5) < 0) {
			fclose(f);
			fprintf(stderr, "memtrace check: out of memory\n");
			return EXIT_CANNOT_CHECK;
		}
	}
	fclose(f);
	return 0;
}

/* The first suppression matching a frame of the stack, or -1. */
static long suppressed_by(const struct suppressions *sup, const struct mt_sym *syms, int n)
{
	for (size_t p = 0; p < sup->n; p++)
		for (int i = 0; i < n; i++)
			if (pattern_matches(sup->pattern[p], syms[i].function) ||
			    pattern_matches(sup->pattern[p], syms[i].file) ||
			    pattern_matches(sup->pattern[p], syms[i].module))
				return (long)p;
	return -1;
}

static void print_stack_line(struct mt_sym *syms, int n, uint64_t bytes, uint64_t blocks)
{
	char size[32], frame[512];

	mt_size_text(size, sizeof(size), bytes);
	printf("  %s in %" PRIu64 " block%s", size, blocks, blocks == 1 ? "" : "s");
	if (n > 0) {
		mt_cmd_label_text(frame, sizeof(frame), syms, n);
		printf(" by %s:", frame);
	} else {
		printf(": (no stack recorded)");
	}
	for (int i = 0; i < n && i < SHOW_FRAMES; i++) {
		mt_cmd_frame_text(frame, sizeof(frame), &syms[i]);
		printf("%s %s", i ? " <" : "", frame);
	}
	if (n > SHOW_FRAMES)
		printf(" < ...");
	putchar('\n');
}

/* A limit for every kind, or for one named kind ("cuda:0=1G"), which then wins. */
struct limit {
	uint64_t all, kind[MT_KIND_COUNT];
	bool have_all, have_kind[MT_KIND_COUNT];
};

static bool limit_of(const struct limit *l, enum mt_kind k, uint64_t *out)
{
	if (l->have_kind[k]) {
		*out = l->kind[k];
		return true;
	}
	*out = l->all;
	return l->have_all;
}

struct gate {
	struct limit leaked, peak;
	bool counted[MT_LEAK_CLASS_COUNT];
	struct suppressions sup;
	struct mt_sym *syms;
	uint64_t suppressed_bytes, suppressed_blocks;
	struct mt_leak_count uncounted[MT_LEAK_CLASS_COUNT]; /* live in the classes not counted */
	unsigned failures;
	struct mt_window window; /* --from-mark, --to-mark: window.from is NULL without */
};

/* The row's bytes and blocks of the classes counted, in place of all it leaked. */
static struct mt_stack_row counted_row(const struct gate *g, const struct mt_stack_row *r)
{
	struct mt_stack_row c = *r;

	c.leaked_bytes = c.leaked_blocks = 0;
	for (int i = 0; i < MT_LEAK_CLASS_COUNT; i++) {
		if (!g->counted[i])
			continue;
		c.leaked_bytes += mt_stack_row_reach(r, (enum mt_leak_class)i).bytes;
		c.leaked_blocks += mt_stack_row_reach(r, (enum mt_leak_class)i).blocks;
	}
	/* a row whose reach is NULL (all unclassified) keeps its figures: unclassified is always
	 * counted */
	return c;
}

/* " (definite + indirect)": what a classified kind's figure is made of. */
static void print_counted(const struct gate *g, const struct mt_kind_result *k)
{
	const char *sep = " (";

	if (!k->classified)
		return;
	for (int i = 0; i < MT_LEAK_CLASS_COUNT; i++) {
		if (!g->counted[i] || (i == MT_LEAK_UNCLASSIFIED && !k->leak_kinds[i].blocks))
			continue;
		printf("%s%s", sep, mt_leak_class_name((enum mt_leak_class)i));
		sep = " + ";
	}
	putchar(')');
}

/* "process 12 (cmd): host leaked 1.00 KiB in 2 blocks" */
static void print_leak_line(const struct gate *g, const struct mt_process_result *p,
                            enum mt_kind kind, uint64_t bytes, uint64_t blocks)
{
	char b1[32];

	mt_size_text(b1, sizeof(b1), bytes);
	printf("memtrace check: process %u (", p->in->pid);
	mt_put_text(stdout, mt_cmd_command(p->in));
	printf("): %s %s %s in %" PRIu64 " block%s", mt_kind_name(kind),
	       g->window.from              ? "kept"
	       : p->in->end == MT_END_EXIT ? "leaked"
	                                   : "live at death",
	       b1, blocks, blocks == 1 ? "" : "s");
	if (g->window.from) {
		fputs(" from mark \"", stdout);
		mt_put_text(stdout, g->window.from);
		fputs("\" to mark \"", stdout);
		mt_put_text(stdout, g->window.to);
		putchar('"');
	} else {
		print_counted(g, &p->kind[kind]);
	}
}

/*
 * One process and kind: the leaks (or, with marks, what the stacks kept
 * between them: w) against --max-leaked, and the peak against --max-peak.
 */
static void check_kind(struct mt_analysis *a, struct gate *g, const struct mt_process_result *p,
                       enum mt_kind kind, const struct mt_window_proc *w)
{
	const struct mt_kind_result *k = &p->kind[kind];
	/* a suppression matches a stack by its native frames: the stacks before their groups */
	const struct mt_stack_row *stacks = w               ? w->rows[kind]
	                                    : k->stack_rows ? k->stack_rows
	                                                    : k->rows;
	size_t nstacks = w ? w->nrows[kind] : k->stack_rows ? k->nstack_rows : k->nrows;
	bool group = w ? a->groups != NULL : k->stack_rows != NULL;
	struct mt_stack_row *rows = malloc((nstacks ? nstacks : 1) * sizeof(*rows)), *grouped;
	size_t n = 0;
	uint64_t bytes = 0, blocks = 0;
	char b1[32], b2[32];

	if (!rows) {
		g->failures++;
		printf("memtrace check: out of memory\n");
		return;
	}
	/* the leaking stacks that no suppression covers, largest first */
	for (size_t i = 0; i < nstacks; i++) {
		struct mt_stack_row c = counted_row(g, &stacks[i]);
		const struct mt_stack_row *r = &c;
		int nf;
		long s;
		for (int j = 0; j < MT_LEAK_CLASS_COUNT; j++) {
			if (g->counted[j])
				continue;
			struct mt_leak_count l =
			        mt_stack_row_reach(&stacks[i], (enum mt_leak_class)j);
			g->uncounted[j].bytes += l.bytes;
			g->uncounted[j].blocks += l.blocks;
		}
		if (!r->leaked_bytes && !r->leaked_blocks)
			continue;
		nf = mt_analysis_native_frames(a, r->stack_instance, r->stack, g->syms, MAX_FRAMES);
		s = g->sup.n ? suppressed_by(&g->sup, g->syms, nf) : -1;
		if (s >= 0) {
			g->sup.hits[s] += r->leaked_bytes;
			g->suppressed_bytes += r->leaked_bytes;
			g->suppressed_blocks += r->leaked_blocks;
			continue;
		}
		bytes += r->leaked_bytes;
		blocks += r->leaked_blocks;
		rows[n++] = *r;
	}
	if (group) {
		if (mt_analysis_group_rows(a, rows, n, &grouped, &n) < 0) {
			free(rows);
			g->failures++;
			printf("memtrace check: out of memory\n");
			return;
		}
		free(rows);
		rows = grouped;
	}
	uint64_t max_leaked = 0, max_peak = 0;
	limit_of(&g->leaked, kind, &max_leaked); /* no limit given: 0, as LeakSanitizer */
	if (bytes > max_leaked || (!max_leaked && blocks)) {
		g->failures++;
		mt_size_text(b2, sizeof(b2), max_leaked);
		print_leak_line(g, p, kind, bytes, blocks);
		printf(", more than %s\n", b2);
		mt_stack_rows_sort(rows, n, MT_METRIC_LEAKED);
		for (size_t i = 0; i < n && i < SHOW_STACKS; i++) {
			int nf = mt_analysis_frames(a, rows[i].stack_instance, rows[i].stack,
			                            g->syms, MAX_FRAMES);
			print_stack_line(g->syms, nf, rows[i].leaked_bytes, rows[i].leaked_blocks);
		}
		if (n > SHOW_STACKS)
			printf("  ... %zu more stacks\n", n - SHOW_STACKS);
	} else if (w && bytes) {
		/* within the limit: what the window kept is said all the same */
		print_leak_line(g, p, kind, bytes, blocks);
		putchar('\n');
	}
	if (limit_of(&g->peak, kind, &max_peak) && k->stats.peak_bytes > max_peak) {
		g->failures++;
		mt_size_text(b1, sizeof(b1), k->stats.peak_bytes);
		mt_size_text(b2, sizeof(b2), max_peak);
		printf("memtrace check: process %u (", p->in->pid);
		mt_put_text(stdout, mt_cmd_command(p->in));
		printf("): %s peak %s, more than %s\n", mt_kind_name(kind), b1, b2);
		n = 0;
		free(rows);
		/* the peak's rows are the groups' already (no suppression applies to a peak) */
		if (!(rows = malloc((k->nrows ? k->nrows : 1) * sizeof(*rows)))) {
			printf("memtrace check: out of memory\n");
			return;
		}
		for (size_t i = 0; i < k->nrows; i++)
			if (k->rows[i].peak_bytes)
				rows[n++] = k->rows[i];
		mt_stack_rows_sort(rows, n, MT_METRIC_PEAK);
		for (size_t i = 0; i < n && i < SHOW_STACKS; i++) {
			int nf = mt_analysis_frames(a, rows[i].stack_instance, rows[i].stack,
			                            g->syms, MAX_FRAMES);
			print_stack_line(g->syms, nf, rows[i].peak_bytes, rows[i].peak_blocks);
		}
	}
	free(rows);
}

static void usage(FILE *f)
{
	fputs("usage: memtrace check [--max-leaked [KIND=]BYTES] [--max-peak [KIND=]BYTES]\n"
	      "                      [--count-possible] [--count-reachable]\n"
	      "                      [--suppressions FILE] [--native]\n"
	      "                      [--from-mark LABEL --to-mark LABEL] FILE\n"
	      "  --max-leaked counts the blocks the exit's scan found lost (definite, indirect)\n"
	      "  and those no scan judged (a killed process's, a GPU kind's: unclassified);\n"
	      "  --count-possible adds the possibly lost, --count-reachable the still reachable\n"
	      "  (then every live block counts). docs/reachability.md\n"
	      "  --native keeps every native stack apart instead of grouping by the Python stack.\n"
	      "  BYTES may end in K, M, G (powers of 1024); --max-leaked is 0 unless given.\n"
	      "  A limit applies to each memory kind apart; KIND= (host, mmap, cuda-host,\n"
	      "  cuda-managed, cuda:N) sets one kind's, and may be repeated.\n"
	      "  A stack is named by its first frame outside allocation plumbing; add your own\n"
	      "  plumbing as MEMTRACE_PLUMBING='PATTERN:PATTERN' (docs/labels.md).\n"
	      "  --from-mark A --to-mark B: count instead what each stack kept from a process's\n"
	      "  first mark A to its next mark B (no class: every block counts); only the\n"
	      "  processes that made both are judged, a trace still written included.\n"
	      "  exit 0: the gate holds; 1: it fails; 2: the trace cannot be read, or cannot\n"
	      "  support a verdict (cut, still being written, tracing stopped, no process)\n",
	      f);
}

/* With marks, the window of the process in, if it closed; else NULL. */
static const struct mt_window_proc *judged_window(const struct gate *g,
                                                  const struct mt_instance *in)
{
	const struct mt_window_proc *w = mt_window_find(&g->window, in->id);

	return w && w->closed ? w : NULL;
}

/*
 * Why the trace cannot support a verdict, or NULL (mt_cmd_no_verdict); with
 * marks, a window is whole once its closing mark is written, whether or not
 * the program ended, and some process must have made them.
 */
static const char *no_verdict(const struct gate *g, const struct mt_analysis *a, char *buf,
                              size_t size)
{
	const char *why = mt_cmd_no_verdict(a, g->window.from != NULL, buf, size);
	uint32_t judged = 0;

	if (why || !g->window.from)
		return why;
	for (uint32_t i = 0; i < a->nprocs; i++)
		judged += judged_window(g, a->procs[i].in) != NULL;
	return judged ? NULL : "no process made the marks";
}

int mt_cmd_check(int argc, char **argv)
{
	struct gate g = {0};
	const char *file = NULL;
	bool native = false;
	struct mt_analysis *a = NULL;
	char b1[32];
	int status = EXIT_CANNOT_CHECK;
	char whybuf[160];
	const char *why;
	uint32_t judged = 0;
	struct mt_analysis_hooks window_hooks = {.record = mt_window_record,
	                                         .record_ctx = &g.window};

	g.counted[MT_LEAK_DEFINITE] = g.counted[MT_LEAK_INDIRECT] = true;
	g.counted[MT_LEAK_UNCLASSIFIED] = true;
	for (int i = 0; i < argc; i++) {
		bool leaked = !strcmp(argv[i], "--max-leaked"),
		     peak = !strcmp(argv[i], "--max-peak");
		if ((leaked || peak) && i + 1 < argc) {
			struct limit *l = leaked ? &g.leaked : &g.peak;
			char *arg = argv[++i], *eq = strchr(arg, '=');
			int kind = -1;
			uint64_t v;
			if (eq) {
				*eq = 0;
				kind = mt_kind_parse(arg);
				*eq = '=';
			}
			if ((eq && kind < 0) || mt_parse_bytes(eq ? eq + 1 : arg, &v) < 0) {
				fprintf(stderr,
				        "memtrace check: %s wants [KIND=]BYTES (K, M, G suffixes; "
				        "KIND host, mmap, cuda-host, cuda-managed, cuda:N), not "
				        "%s\n",
				        argv[i - 1], arg);
				goto out;
			}
			if (kind >= 0)
				l->kind[kind] = v, l->have_kind[kind] = true;
			else
				l->all = v, l->have_all = true;
		} else if (!strcmp(argv[i], "--native")) {
			native = true;
		} else if (!strcmp(argv[i], "--from-mark") && i + 1 < argc) {
			g.window.from = argv[++i];
		} else if (!strcmp(argv[i], "--to-mark") && i + 1 < argc) {
			g.window.to = argv[++i];
		} else if (!strcmp(argv[i], "--count-possible")) {
			g.counted[MT_LEAK_POSSIBLE] = true;
		} else if (!strcmp(argv[i], "--count-reachable")) {
			g.counted[MT_LEAK_REACHABLE] = true;
		} else if (!strcmp(argv[i], "--suppressions") && i + 1 < argc) {
			if (read_suppressions(&g.sup, argv[++i]))
				goto out;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			status = MT_EXIT_OK;
			goto out;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "memtrace check: unknown option %s\n", argv[i]);
			usage(stderr);
			goto out;
		} else if (file) {
			fprintf(stderr, "memtrace check: one trace at a time\n");
			goto out;
		} else {
			file = argv[i];
		}
	}
	if (!file) {
		usage(stderr);
		goto out;
	}
	if (!g.window.from != !g.window.to) {
		fprintf(stderr, "memtrace check: --from-mark and --to-mark go together\n");
		goto out;
	}
	g.sup.hits = calloc(g.sup.n ? g.sup.n : 1, sizeof(*g.sup.hits));
	g.syms = calloc(MAX_FRAMES, sizeof(*g.syms));
	if (!g.sup.hits || !g.syms) {
		fprintf(stderr, "memtrace check: out of memory\n");
		goto out;
	}
	if (mt_cmd_analyze(file, g.window.from ? &window_hooks : NULL, native, &a) != MT_EXIT_OK)
		goto out; /* the one-line error is printed */
	why = no_verdict(&g, a, whybuf, sizeof(whybuf));
	if (why) {
		printf("memtrace check: no verdict: %s\n", why);
		goto out; /* EXIT_CANNOT_CHECK */
	}
	mt_cmd_sampling_note(stdout, "memtrace check: ", a);
	for (uint32_t i = 0; i < a->nprocs; i++) {
		const struct mt_window_proc *w = judged_window(&g, a->procs[i].in);
		if (g.window.from && !w)
			continue;
		judged++;
		for (int k = 0; k < MT_KIND_COUNT; k++)
			check_kind(a, &g, &a->procs[i], (enum mt_kind)k, w);
	}
	mt_size_text(b1, sizeof(b1), g.suppressed_bytes);
	if (g.failures) {
		printf("memtrace check: FAILED (%u limit%s exceeded)", g.failures,
		       g.failures == 1 ? "" : "s");
		status = EXIT_GATE_FAILED;
	} else {
		printf("memtrace check: ok: %u process%s", judged, judged == 1 ? "" : "es");
		status = MT_EXIT_OK;
	}
	if (g.suppressed_blocks)
		printf(", %s in %" PRIu64 " blocks suppressed", b1, g.suppressed_blocks);
	for (int c = 0, first = 1; c < MT_LEAK_CLASS_COUNT; c++) {
		if (!g.uncounted[c].blocks)
			continue;
		mt_size_text(b1, sizeof(b1), g.uncounted[c].bytes);
		printf("%s%s %s in %" PRIu64, first ? "; not counted: " : ", ",
		       mt_leak_class_name((enum mt_leak_class)c), b1, g.uncounted[c].blocks);
		first = 0;
	}
	putchar('\n');
out:
	mt_analysis_free(a);
	mt_window_free(&g.window);
	free_suppressions(&g.sup);
	free(g.syms);
	return status;
}
