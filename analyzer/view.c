/* SPDX-License-Identifier: MIT */
/*
 * memtrace view: one self-contained HTML page for a trace. The page
 * (viewer/, built into this program) holds its scripts and styles; this
 * command puts the trace's data (view-data.h) between its two halves, in a
 * <script type="application/json"> element.
 *
 * The data is JSON whose every '<' is written as \u003c: no string from a
 * trace (a function, a file, a command line, a mark) can close that element
 * or open another, and the page only ever puts them in as text.
 *
 * May not: compute figures (analysis.c, timeline.c and view-data.c do).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "page.h"
#include "timeline.h"
#include "view-data.h"

static void usage(FILE *f)
{
	fputs("usage: memtrace view [-o FILE.html] [--top N] [--native] FILE\n"
	      "  --native keeps every native stack apart instead of grouping by the Python stack.\n"
	      "  writes one HTML page (FILE with .html for its ending by default; - for "
	      "standard output)\n"
	      "  MEMTRACE_PLUMBING='PATTERN:PATTERN': allocation wrappers of your own, passed "
	      "over\n"
	      "  when a stack is named (docs/labels.md)\n",
	      f);
}

/* trace.bin -> trace.html; a name without an ending gets .html added. */
static char *default_output(const char *file)
{
	const char *slash = strrchr(file, '/'), *dot = strrchr(file, '.');
	size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - file) : strlen(file);
	char *out = malloc(stem + sizeof(".html"));

	if (out) {
		memcpy(out, file, stem);
		strcpy(out + stem, ".html");
	}
	return out;
}

/* The page as it is written, and its bytes (a FIFO or a terminal has no size to ask). */
struct page_out {
	FILE *f;
	size_t bytes;
};

static int put(struct page_out *p, const char *s, size_t n)
{
	p->bytes += n;
	return fwrite(s, 1, n, p->f) == n ? 0 : -1;
}

/* jansson's output, with '<' as \u003c (it is only ever inside a string). */
static int write_escaped(const char *buf, size_t size, void *data)
{
	struct page_out *p = data;
	size_t start = 0;

	for (size_t i = 0; i < size; i++) {
		if (buf[i] != '<')
			continue;
		if (put(p, buf + start, i - start) < 0 || put(p, "\\u003c", 6) < 0)
			return -1;
		start = i + 1;
	}
	return put(p, buf + start, size - start);
}

static int write_page(struct page_out *p, json_t *data)
{
	if (put(p, mt_viewer_page_head, strlen(mt_viewer_page_head)) < 0 ||
	    json_dump_callback(data, write_escaped, p, JSON_COMPACT) < 0 ||
	    put(p, mt_viewer_page_tail, strlen(mt_viewer_page_tail)) < 0)
		return -EIO;
	return fflush(p->f) == 0 ? 0 : -errno;
}

static int parse_args(int argc, char **argv, const char **file, const char **out, unsigned *top,
                      bool *native)
{
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--native")) {
			*native = true;
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			*out = argv[++i];
		} else if (!strcmp(argv[i], "--top") && i + 1 < argc) {
			if (mt_cmd_parse_top("view", argv[++i], top) < 0)
				return MT_EXIT_USAGE;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return -1;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "memtrace view: unknown option %s\n", argv[i]);
			usage(stderr);
			return MT_EXIT_USAGE;
		} else if (*file) {
			fprintf(stderr, "memtrace view: one trace at a time\n");
			return MT_EXIT_USAGE;
		} else {
			*file = argv[i];
		}
	}
	if (!*file) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	return MT_EXIT_OK;
}

int mt_cmd_view(int argc, char **argv)
{
	const char *file = NULL, *out = NULL;
	unsigned top = 10;
	struct mt_timeline t = {0};
	struct mt_analysis_hooks hooks = {.record = mt_timeline_record,
	                                  .before = mt_timeline_before,
	                                  .record_ctx = &t,
	                                  .prefetch = true};
	struct mt_analysis *a = NULL;
	json_t *data = NULL;
	char *made = NULL;
	struct mt_output o = {0};
	bool native = false;
	int status = parse_args(argc, argv, &file, &out, &top, &native), r;
	size_t size = 0;

	if (status < 0)
		return MT_EXIT_OK;
	if (status != MT_EXIT_OK)
		return status;
	if (!out && !(out = made = default_output(file))) {
		status = MT_EXIT_BAD_TRACE;
		goto out;
	}
	status = mt_cmd_analyze(file, &hooks, native, &a);
	if (status != MT_EXIT_OK)
		goto out;
	mt_timeline_finish(&t);
	data = mt_view_data(a, &t, file, top);
	if (!data) {
		fprintf(stderr, "memtrace view: %s: out of memory\n", file);
		status = MT_EXIT_BAD_TRACE;
		goto out;
	}
	r = mt_cmd_output_open(&o, out);
	if (r == 0) {
		struct page_out p = {.f = o.f};

		r = write_page(&p, data);
		size = p.bytes;
		if (r == 0)
			r = mt_cmd_output_commit(&o);
	}
	if (r < 0) {
		fprintf(stderr, "memtrace view: %s: %s\n", out, strerror(-r));
		status = MT_EXIT_BAD_TRACE;
		goto out;
	}
	if (strcmp(out, "-"))
		fprintf(stderr, "memtrace view: wrote %s (%zu KiB)\n", out, (size + 1023) / 1024);
out:
	mt_cmd_output_abort(&o);
	json_decref(data);
	mt_analysis_free(a);
	mt_timeline_free(&t);
	free(made);
	return status;
}
