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
#include "grow.h"
#include "map.h"

#define MAX_FRAMES 512

/*
 * A stack is kept as the ids of its frames' texts, outermost first, not as
 * its line: a torch program's stacks are a hundred frames deep and share
 * most of them, so the lines would hold the output several times over, and
 * every frame would be named and escaped again at each stack it is in.
 * Equal texts have one id, so equal lines are equal id lists.
 */
struct folded {
	size_t first; /* into out.ids */
	uint32_t n;
	uint64_t value;
};

struct out {
	struct folded *v;
	size_t n, cap;
	uint32_t *ids;
	size_t nids, ids_cap;
	/* the texts: id -> offset of a NUL-terminated string in pool */
	char *pool;
	size_t pool_n, pool_cap;
	size_t *text;
	uint32_t ntext, text_cap;
	struct mt_map by_hash;     /* hash of a text (+ probe) -> id + 1 */
	struct mt_map by_function; /* the symbolizer's interned name -> id + 1 */
	struct mt_map by_tail;     /* a group's innermost frame, by its tail (group.c) -> id + 1 */
	struct mt_map by_module;   /* the symbolizer's interned module name -> offsets index + 1 */
	struct mt_map *offsets;    /* offset -> id + 1, one map per module */
	uint32_t noffsets, offsets_cap;
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

	if (s->function && s->tail) {
		/* a group's innermost Python frame with the native label folded into it */
		if (put_name(b, s->function) < 0 || buf_put(b, " (", 2) < 0 ||
		    put_name(b, s->tail) < 0)
			return -1;
		return buf_put(b, ")", 1);
	}
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

static const char *text_of(const struct out *o, uint32_t id)
{
	return o->pool + o->text[id];
}

/* The id of a frame's text, made on its first use; -1 without memory. */
static int64_t intern(struct out *o, const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t cap = o->text_cap;
	bool created;
	uint32_t *slot;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	/* a colliding hash moves on to the next key */
	for (;; h++) {
		slot = mt_map_put(&o->by_hash, h, &created);
		if (!slot)
			return -1;
		if (created)
			break;
		if (!strcmp(text_of(o, *slot - 1), s))
			return *slot - 1;
	}
	if (mt_grow((void **)&o->pool, &o->pool_cap, o->pool_n + len + 1, 1) < 0 ||
	    mt_grow((void **)&o->text, &cap, (size_t)o->ntext + 1, sizeof(*o->text)) < 0) {
		mt_map_del(&o->by_hash, h);
		return -1;
	}
	o->text_cap = (uint32_t)cap;
	memcpy(o->pool + o->pool_n, s, len + 1);
	o->text[o->ntext] = o->pool_n;
	o->pool_n += len + 1;
	*slot = ++o->ntext;
	return o->ntext - 1;
}

static int push_id(struct out *o, int64_t id)
{
	if (id < 0 || mt_grow((void **)&o->ids, &o->ids_cap, o->nids + 1, sizeof(*o->ids)) < 0)
		return -1;
	o->ids[o->nids++] = (uint32_t)id;
	return 0;
}

/*
 * A frame's text id, the text made once: a named frame's found by its
 * (interned) name, another by its module's name (interned too, NULL for
 * none) and its offset (the address with no module).
 */
static int64_t frame_id(struct out *o, struct buf *b, const struct mt_sym *s)
{
	struct mt_map *map = &o->by_function;
	uint64_t key = (uint64_t)(uintptr_t)s->function;
	uint32_t *slot, *module;
	bool created;
	int64_t id;

	if (s->tail) {
		map = &o->by_tail;
		key = (uint64_t)(uintptr_t)s->tail;
	} else if (!s->function) {
		module = mt_map_put(&o->by_module, (uint64_t)(uintptr_t)s->module, &created);
		if (!module)
			return -1;
		if (created) {
			size_t cap = o->offsets_cap;
			if (mt_grow((void **)&o->offsets, &cap, (size_t)o->noffsets + 1,
			            sizeof(*o->offsets)) < 0) {
				mt_map_del(&o->by_module, (uint64_t)(uintptr_t)s->module);
				return -1;
			}
			o->offsets_cap = (uint32_t)cap;
			mt_map_init(&o->offsets[o->noffsets], sizeof(uint32_t));
			*module = ++o->noffsets;
		}
		map = &o->offsets[*module - 1];
		key = s->module ? s->offset : s->address;
	}
	slot = mt_map_put(map, key, &created);
	if (!slot)
		return -1;
	if (!created)
		return *slot - 1;
	b->n = 0;
	if (put_frame(b, s) < 0) {
		id = -1;
	} else {
		if (b->s)
			b->s[b->n] = 0; /* a name that put nothing leaves the last text */
		id = intern(o, b->s ? b->s : "", b->n);
	}
	if (id < 0)
		mt_map_del(map, key);
	else
		*slot = (uint32_t)id + 1;
	return id;
}

/* ids from add() onwards make one line of value */
static int add(struct out *o, size_t first, uint64_t value)
{
	if (mt_grow((void **)&o->v, &o->cap, o->n + 1, sizeof(*o->v)) < 0)
		return -1;
	o->v[o->n++] =
	        (struct folded){.first = first, .n = (uint32_t)(o->nids - first), .value = value};
	return 0;
}

static const struct out *sorting;

/*
 * The order of the lines as strcmp would sort them, from the ids: up to the
 * first frame that differs the lines are equal, and the texts contain no
 * ';', so that frame's text followed by what comes next (';', or the end of
 * the line) decides.
 */
static int cmp_folded(const void *pa, const void *pb)
{
	const struct folded *a = pa, *b = pb;
	const uint32_t *x = sorting->ids + a->first, *y = sorting->ids + b->first;
	uint32_t i = 0;
	const unsigned char *s, *t;

	while (i < a->n && i < b->n && x[i] == y[i])
		i++;
	if (i == a->n || i == b->n)
		return (i < a->n) - (i < b->n);
	s = (const unsigned char *)text_of(sorting, x[i]);
	t = (const unsigned char *)text_of(sorting, y[i]);
	while (*s && *s == *t)
		s++, t++;
	return (*s ? *s : i + 1 < a->n ? ';' : 0) - (*t ? *t : i + 1 < b->n ? ';' : 0);
}

static bool same_line(const struct out *o, const struct folded *a, const struct folded *b)
{
	return a->n == b->n &&
	       !memcmp(o->ids + a->first, o->ids + b->first, a->n * sizeof(*o->ids));
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
	int64_t root_id = -1, no_stack = intern(o, "[no stack]", 10);
	int r = -1;

	if (no_stack < 0)
		goto out;
	if (root && (root_of(&b, p->in) < 0 || (root_id = intern(o, b.s, b.n)) < 0))
		goto out;
	for (size_t i = 0; i < k->nrows; i++) {
		const struct mt_stack_row *row = &k->rows[i];
		uint64_t v = mt_stack_row_value(row, m);
		size_t first = o->nids;
		int n;

		if (!v)
			continue;
		sum += v;
		if (root && push_id(o, root_id) < 0)
			goto out;
		n = mt_analysis_frames(a, row->stack_instance, row->stack, syms, MAX_FRAMES);
		if (n <= 0 && push_id(o, no_stack) < 0)
			goto out;
		for (int f = n - 1; f >= 0; f--)
			if (push_id(o, frame_id(o, &b, &syms[f])) < 0)
				goto out;
		if (add(o, first, v) < 0)
			goto out;
	}
	if (total > sum) {
		size_t first = o->nids;

		if ((root && push_id(o, root_id) < 0) || push_id(o, no_stack) < 0 ||
		    add(o, first, total - sum) < 0)
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
	      "                           [--kind host|mmap|cuda-host|cuda-managed|cuda:N]\n"
	      "                           [--native] FILE\n"
	      "  --native keeps every native stack apart instead of grouping by the Python "
	      "stack.\n",
	      f);
}

int mt_cmd_flamegraph(int argc, char **argv)
{
	const char *file = NULL;
	int metric = MT_METRIC_PEAK, kind = MT_KIND_HOST, status;
	bool native = false;
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
		} else if (!strcmp(argv[i], "--native")) {
			native = true;
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
	status = mt_cmd_analyze(file, &mt_cmd_frames, native, &a);
	if (status != MT_EXIT_OK)
		return status;
	/* on stderr: the folded lines stay what flamegraph.pl reads */
	mt_cmd_sampling_note(stderr, "memtrace flamegraph: ", a);
	mt_map_init(&o.by_hash, sizeof(uint32_t));
	mt_map_init(&o.by_function, sizeof(uint32_t));
	mt_map_init(&o.by_tail, sizeof(uint32_t));
	mt_map_init(&o.by_module, sizeof(uint32_t));
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
		sorting = &o;
		if (o.n > 1)
			qsort(o.v, o.n, sizeof(*o.v), cmp_folded);
		for (size_t i = 0; i < o.n;) {
			size_t j = i;
			uint64_t v = 0;
			while (j < o.n && same_line(&o, &o.v[j], &o.v[i]))
				v += o.v[j++].value;
			for (uint32_t f = 0; f < o.v[i].n; f++) {
				fputs(text_of(&o, o.ids[o.v[i].first + f]), stdout);
				putchar(f + 1 < o.v[i].n ? ';' : ' ');
			}
			printf("%" PRIu64 "\n", v);
			i = j;
		}
	}
	free(o.v);
	free(o.ids);
	free(o.pool);
	free(o.text);
	mt_map_free(&o.by_hash);
	mt_map_free(&o.by_function);
	mt_map_free(&o.by_tail);
	mt_map_free(&o.by_module);
	for (uint32_t i = 0; i < o.noffsets; i++)
		mt_map_free(&o.offsets[i]);
	free(o.offsets);
	free(syms);
	mt_analysis_free(a);
	return status;
}
