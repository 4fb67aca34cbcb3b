/* SPDX-License-Identifier: MIT */
/*
 * memtrace export: a trace in another tool's format (docs/export.md).
 * `--format pprof` writes gzipped pprof profiles (pprof.h), one with the
 * bytes in use at each process's peak and one with those at its end;
 * `--format chrome-trace` Trace Event JSON (chrome-trace.h), written while
 * the trace is replayed.
 *
 * May not: compute figures (analysis.c does) or encode a format (pprof.c,
 * chrome-trace.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memtrace/output-place.h>

#include "chrome-trace.h"
#include "commands.h"
#include "pprof.h"

enum format { FORMAT_NONE, FORMAT_PPROF, FORMAT_CHROME };

struct options {
	enum format format;
	const char *file, *out;
	int kind;
	int at; /* enum mt_pprof_inuse, or -1: both profiles */
	bool native;
};

static void usage(FILE *f)
{
	fputs("usage: memtrace export --format pprof -o FILE.pb.gz [--at peak|end]\n"
	      "                       [--kind host|mmap|cuda-host|cuda-managed|cuda:N] [--native] "
	      "TRACE\n"
	      "  pprof: gzipped profile.proto for go tool pprof, speedscope, Pyroscope, Parca;\n"
	      "  sample types alloc_objects, alloc_space, inuse_objects, inuse_space, each sample\n"
	      "  labelled with its process's pid and command. In use is at each process's peak\n"
	      "  in FILE.pb.gz and at its end in FILE.end.pb.gz; --at writes only that one, to\n"
	      "  FILE (- for standard output). One memory kind (host unless --kind).\n"
	      "  --native keeps every native stack apart instead of grouping by the Python "
	      "stack.\n"
	      "   or: memtrace export --format chrome-trace -o FILE.json TRACE\n"
	      "  chrome-trace: Trace Event JSON for Perfetto's UI and chrome://tracing: each\n"
	      "  process's live bytes per memory kind and its RSS as counters, its marks,\n"
	      "  failed allocations and end as instant events (- for standard output).\n",
	      f);
}

/*
 * Whether out is a name beside which FILE.end may be made: "-", a device, a
 * FIFO or standard output's file takes one profile (the second would be a
 * new file beside /dev/null).
 */
static bool takes_two_profiles(const char *out)
{
	int std;

	if (!strcmp(out, "-"))
		return false;
	switch (mt_output_place(out, &std)) {
	case MT_PLACE_NONE:
	case MT_PLACE_FILE:
	case MT_PLACE_DIR: /* the error is the writer's to say */
		return true;
	default:
		return false;
	}
}

/* 0, or the exit status; -1 after --help. */
static int parse_args(int argc, char **argv, struct options *o)
{
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "pprof")) {
				o->format = FORMAT_PPROF;
			} else if (!strcmp(argv[i], "chrome-trace")) {
				o->format = FORMAT_CHROME;
			} else {
				fprintf(stderr, "memtrace export: unknown format %s\n", argv[i]);
				usage(stderr);
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			o->out = argv[++i];
		} else if (!strcmp(argv[i], "--kind") && i + 1 < argc) {
			o->kind = mt_kind_parse(argv[++i]);
			if (o->kind < 0) {
				fprintf(stderr, "memtrace export: unknown memory kind %s\n",
				        argv[i]);
				usage(stderr);
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--at") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "peak") || !strcmp(argv[i], "end")) {
				o->at = !strcmp(argv[i], "peak") ? MT_PPROF_AT_PEAK
				                                 : MT_PPROF_AT_END;
			} else {
				fprintf(stderr, "memtrace export: --at wants peak or end, not %s\n",
				        argv[i]);
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--native")) {
			o->native = true;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return -1;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "memtrace export: unknown option %s\n", argv[i]);
			usage(stderr);
			return MT_EXIT_USAGE;
		} else if (o->file) {
			fprintf(stderr, "memtrace export: one trace at a time\n");
			return MT_EXIT_USAGE;
		} else {
			o->file = argv[i];
		}
	}
	if (!o->file || !o->format || !o->out) {
		fprintf(stderr, "memtrace export: %s\n",
		        !o->format ? "--format is needed"
		        : !o->out  ? "-o FILE is needed"
		                   : "which trace?");
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	if (o->format == FORMAT_PPROF && o->at < 0 && !takes_two_profiles(o->out)) {
		fprintf(stderr,
		        "memtrace export: two profiles cannot both go to %s: "
		        "add --at peak or --at end\n",
		        strcmp(o->out, "-") ? o->out : "standard output");
		return MT_EXIT_USAGE;
	}
	return 0;
}

/* FILE.pb.gz -> FILE.end.pb.gz; another name gets .end at its end. */
static char *end_name(const char *out)
{
	size_t len = strlen(out), base = len;
	char *s = malloc(len + sizeof(".end"));

	if (!s)
		return NULL;
	if (len > 6 && !strcmp(out + len - 6, ".pb.gz"))
		base = len - 6;
	sprintf(s, "%.*s.end%s", (int)base, out, out + base);
	return s;
}

/* One profile to path; prints its error; 0 or the exit status. */
static int write_pprof(struct mt_analysis *a, const struct options *o, enum mt_pprof_inuse at,
                       const char *path)
{
	struct mt_pb pb = {0};
	struct mt_output out = {0};
	int r = mt_pprof_build(a, (enum mt_kind)o->kind, at, &pb);

	if (r < 0) {
		fprintf(stderr, "memtrace export: %s: %s\n", o->file, strerror(-r));
		mt_pb_free(&pb);
		return MT_EXIT_BAD_TRACE;
	}
	r = mt_cmd_output_open(&out, path);
	if (r == 0 && (r = mt_pprof_gzip(out.f, pb.data, pb.n)) == 0)
		r = mt_cmd_output_commit(&out);
	mt_cmd_output_abort(&out);
	mt_pb_free(&pb);
	if (r < 0) {
		fprintf(stderr, "memtrace export: %s: %s\n", path, strerror(-r));
		return MT_EXIT_BAD_TRACE;
	}
	if (strcmp(path, "-"))
		fprintf(stderr, "memtrace export: wrote %s (in use at each process's %s)\n", path,
		        at == MT_PPROF_AT_PEAK ? "peak" : "end");
	return MT_EXIT_OK;
}

/* The counters are written while the trace is replayed, into the output file. */
static int export_chrome(const struct options *o)
{
	struct mt_chrome_trace *t = NULL;
	struct mt_analysis_hooks hooks = {.before = mt_chrome_trace_before};
	struct mt_analysis *a = NULL;
	struct mt_output out = {0};
	int status = MT_EXIT_BAD_TRACE, r;

	r = mt_cmd_output_open(&out, o->out);
	if (r == 0)
		r = mt_chrome_trace_new(&t, out.f, o->file);
	if (r < 0) {
		fprintf(stderr, "memtrace export: %s: %s\n", o->out, strerror(-r));
		goto out;
	}
	hooks.record_ctx = t;
	/* the JSON has no stacks: nothing to group */
	if (mt_cmd_analyze(o->file, &hooks, true, &a) != MT_EXIT_OK)
		goto out; /* the one-line error is printed; the file is not made */
	mt_cmd_sampling_note(stderr, "memtrace export: ", a);
	r = mt_chrome_trace_finish(t, a);
	if (r == 0)
		r = mt_cmd_output_commit(&out);
	if (r < 0) {
		fprintf(stderr, "memtrace export: %s: %s\n", o->out, strerror(-r));
		goto out;
	}
	if (strcmp(o->out, "-"))
		fprintf(stderr, "memtrace export: wrote %s\n", o->out);
	status = MT_EXIT_OK;
out:
	mt_cmd_output_abort(&out);
	mt_chrome_trace_free(t);
	mt_analysis_free(a);
	return status;
}

int mt_cmd_export(int argc, char **argv)
{
	struct options o = {.kind = MT_KIND_HOST, .at = -1};
	struct mt_analysis *a = NULL;
	char *end = NULL;
	int status = parse_args(argc, argv, &o);

	if (status < 0)
		return MT_EXIT_OK;
	if (status)
		return status;
	if (o.format == FORMAT_CHROME)
		return export_chrome(&o);
	status = mt_cmd_analyze(o.file, &mt_cmd_frames, o.native, &a);
	if (status != MT_EXIT_OK)
		return status;
	mt_cmd_sampling_note(stderr, "memtrace export: ", a);
	if (o.at >= 0) {
		status = write_pprof(a, &o, (enum mt_pprof_inuse)o.at, o.out);
	} else if (!(end = end_name(o.out))) {
		fprintf(stderr, "memtrace export: out of memory\n");
		status = MT_EXIT_BAD_TRACE;
	} else {
		status = write_pprof(a, &o, MT_PPROF_AT_PEAK, o.out);
		if (status == MT_EXIT_OK)
			status = write_pprof(a, &o, MT_PPROF_AT_END, end);
	}
	free(end);
	mt_analysis_free(a);
	return status;
}
