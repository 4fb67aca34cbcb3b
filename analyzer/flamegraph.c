/* SPDX-License-Identifier: MIT */
/*
 * memtrace flamegraph: folded stacks, one line per distinct stack,
 * `outermost;...;innermost VALUE`, the input flamegraph.pl, inferno and
 * speedscope take as it is. The values of one process add up to the
 * report's figure for the metric (docs/json-report.md); a part of that
 * figure with no stack (an allocation that returned no block) is a line of
 * its own, `[no stack]`, so the totals still agree.
 *
 * With more than one process in the trace each stack starts with a root
 * frame naming its process, `pid_1234_(command)`.
 *
 * May not: compute figures (analysis.c does).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "commands.h"

#define MAX_FRAMES 512

struct folded {
	char *stack;
	uint64_t value;
};

struct out {
	struct folded *v;
	size_t n, cap;
};

struct buf {
	char *s;
	size_t n, cap;
};

static int buf_put(struct buf *b, const char *s, size_t len)
{
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		void *p;
		while (cap < b->n + len + 1)
			cap *= 2;
		p = realloc(b->s, cap);
		if (!p)
			return -1;
		b->s = p;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, len);
	b->n += len;
	b->s[b->n] = 0;
	return 0;
}

/*
 * A frame name that keeps the folded format valid: ';' separates frames
 * and the last space separates the value, so neither may appear. The
 * spaces C++ demangling puts after a comma and between closing angle
 * brackets carry nothing and go; the others become '_'. Control
 * characters and bytes that are not UTF-8 are escaped as in every text
 * output (commands.h), so no line is cut or forged.
 */
static int put_name(struct buf *b, const char *raw)
{
	size_t len = strlen(raw);
	/* escaping lengthens what it changes: most names are kept and not copied */
	bool plain = mt_escape(NULL, 0, raw, len, MT_ESCAPE_CONTROL) == len;
	char *copy = plain ? NULL : mt_escape_dup(raw, len, MT_ESCAPE_CONTROL);
	const char *name = plain ? raw : copy;
	int r = 0;

	if (!name)
		return -1;
	for (const char *p = name; *p && r == 0; p++) {
		char c = *p;
		if (c == ' ' && p > name && (p[-1] == ',' || p[1] == '>'))
			continue;
		if (c == ' ')
			c = '_';
		else if (c == ';')
			c = ':';
		r = buf_put(b, &c, 1);
	}
	free(copy);
	return r;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static int put_frame(struct buf *b, const struct mt_sym *s)
{
	char tmp[64];

	if (s->function)
		return put_name(b, s->function);
	if (s->module) {
		if (put_name(b, base_name(s->module)) < 0)
			return -1;
		snprintf(tmp, sizeof(tmp), "+0x%" PRIx64, s->offset);
	} else {
		snprintf(tmp, sizeof(tmp), "0x%" PRIx64, s->address);
	}
	return buf_put(b, tmp, strlen(tmp));
}

static int add(struct out *o, const char *stack, uint64_t value)
{
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		void *p = realloc(o->v, cap * sizeof(*o->v));
		if (!p)
			return -1;
		o->v = p;
		o->cap = cap;
	}
	o->v[o->n].stack = strdup(stack);
	if (!o->v[o->n].stack)
		return -1;
	o->v[o->n++].value = value;
	return 0;
}

static int cmp_folded(const void *a, const void *b)
{
	return strcmp(((const struct folded *)a)->stack, ((const struct folded *)b)->stack);
}

static int root_of(struct buf *b, const struct mt_instance *in)
{
	char tmp[64];
	const char *cmd = mt_cmd_command(in);
	const char *end = strchr(cmd, ' ');
	size_t len = end ? (size_t)(end - cmd) : strlen(cmd);
	char *arg0 = strndup(cmd, len);
	int r;

	if (!arg0)
		return -1;
	snprintf(tmp, sizeof(tmp), "pid %u (", in->pid);
	r = put_name(b, tmp) < 0 || put_name(b, base_name(arg0)) < 0 || buf_put(b, ")", 1) < 0 ? -1
	                                                                                       : 0;
	free(arg0);
	return r;
}

static int fold_process(struct mt_analysis *a, const struct mt_process_result *p, enum mt_kind kind,
                        enum mt_metric m, bool root, struct mt_sym *syms, struct out *o)
{
	const struct mt_kind_result *k = &p->kind[kind];
	struct buf b = {0};
	uint64_t sum = 0, total = mt_kind_result_total(k, m);
	int r = -1;

	for (size_t i = 0; i < k->nrows; i++) {
		const struct mt_stack_row *row = &k->rows[i];
		uint64_t v = mt_stack_row_value(row, m);
		int n;

		if (!v)
			continue;
		sum += v;
		b.n = 0;
		if (root && (root_of(&b, p->in) < 0 || buf_put(&b, ";", 1) < 0))
			goto out;
		n = mt_analysis_frames(a, row->stack_instance, row->stack, syms, MAX_FRAMES);
		if (n <= 0 && buf_put(&b, "[no stack]", 10) < 0)
			goto out;
		for (int f = n - 1; f >= 0; f--)
			if (put_frame(&b, &syms[f]) < 0 || (f > 0 && buf_put(&b, ";", 1) < 0))
				goto out;
		if (add(o, b.s, v) < 0)
			goto out;
	}
	if (total > sum) {
		b.n = 0;
		if (root && (root_of(&b, p->in) < 0 || buf_put(&b, ";", 1) < 0))
			goto out;
		if (buf_put(&b, "[no stack]", 10) < 0 || add(o, b.s, total - sum) < 0)
			goto out;
	}
	r = 0;
out:
	free(b.s);
	return r;
}

static void usage(FILE *f)
{
	fputs("usage: memtrace flamegraph [--metric peak|leaked|allocated|allocations|temporary]\n"
	      "                           [--kind host|mmap|cuda-host|cuda-managed|cuda:N] FILE\n",
	      f);
}

int mt_cmd_flamegraph(int argc, char **argv)
{
	const char *file = NULL;
	int metric = MT_METRIC_PEAK, kind = MT_KIND_HOST, status;
	struct mt_analysis *a;
	struct mt_sym *syms;
	struct out o = {0};

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--metric") && i + 1 < argc) {
			metric = mt_metric_parse(argv[++i]);
			if (metric < 0) {
				fprintf(stderr, "memtrace flamegraph: unknown metric %s\n",
				        argv[i]);
				usage(stderr);
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--kind") && i + 1 < argc) {
			kind = mt_kind_parse(argv[++i]);
			if (kind < 0) {
				fprintf(stderr, "memtrace flamegraph: unknown memory kind %s\n",
				        argv[i]);
				usage(stderr);
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return MT_EXIT_OK;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "memtrace flamegraph: unknown option %s\n", argv[i]);
			usage(stderr);
			return MT_EXIT_USAGE;
		} else if (file) {
			fprintf(stderr, "memtrace flamegraph: one trace at a time\n");
			return MT_EXIT_USAGE;
		} else {
			file = argv[i];
		}
	}
	if (!file) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	status = mt_cmd_analyze(file, NULL, &a);
	if (status != MT_EXIT_OK)
		return status;
	syms = calloc(MAX_FRAMES, sizeof(*syms));
	for (uint32_t i = 0; syms && i < a->nprocs; i++) {
		if (fold_process(a, &a->procs[i], (enum mt_kind)kind, (enum mt_metric)metric,
		                 a->nprocs > 1, syms, &o) < 0) {
			free(syms);
			syms = NULL;
		}
	}
	if (!syms) {
		fprintf(stderr, "memtrace flamegraph: out of memory\n");
		status = MT_EXIT_BAD_TRACE;
	} else {
		/* one line per distinct stack: frames that symbolize alike merge */
		if (o.n > 1)
			qsort(o.v, o.n, sizeof(*o.v), cmp_folded);
		for (size_t i = 0; i < o.n;) {
			size_t j = i;
			uint64_t v = 0;
			while (j < o.n && !strcmp(o.v[j].stack, o.v[i].stack))
				v += o.v[j++].value;
			printf("%s %" PRIu64 "\n", o.v[i].stack, v);
			i = j;
		}
	}
	for (size_t i = 0; i < o.n; i++)
		free(o.v[i].stack);
	free(o.v);
	free(syms);
	mt_analysis_free(a);
	return status;
}
