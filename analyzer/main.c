/* SPDX-License-Identifier: MIT */
/*
 * memtrace: the command-line front end. Picks the command and maps nothing
 * itself; each command (commands.h) parses its own arguments and returns
 * the exit status: 0 ok, 1 usage, 2 unreadable trace (check: 1 means the
 * gate failed).
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static void usage(FILE *f)
{
	fputs("usage: memtrace COMMAND [ARGS...]\n"
	      "\n"
	      "commands:\n"
	      "  run [-o FILE] [--depth N] [--interval MS] [--no-mmap] -- PROGRAM [ARGS...]\n"
	      "                          run PROGRAM under the tracer (trace.bin by default)\n"
	      "  dump [--summary] [--json] FILE\n"
	      "                          print a trace's records and a per process summary\n"
	      "  report [--top N] [--json] FILE [FILE...]\n"
	      "                          peak, leaks, failures and temporaries per process, with "
	      "stacks;\n"
	      "                          several traces (one per rank) side by side\n"
	      "  flamegraph [--metric peak|leaked|allocated|allocations|temporary] [--kind "
	      "host|mmap] FILE\n"
	      "                          folded stacks for flamegraph.pl, inferno or speedscope\n"
	      "  check [--max-leaked BYTES] [--max-peak BYTES] [--suppressions FILE]\n"
	      "        [--from-mark A --to-mark B] FILE\n"
	      "                          CI gate: exit 0 ok, 1 over a limit, 2 unreadable trace\n"
	      "  diff [--json] [--fail-on-increase PCT] [--fail-on-leak-increase BYTES] BASE NEW\n"
	      "                          what changed per stack between two traces; a CI gate\n"
	      "  export --format pprof|chrome-trace -o OUT FILE\n"
	      "                          the trace for go tool pprof, speedscope, Perfetto\n"
	      "  view [-o FILE.html] [--top N] FILE\n"
	      "                          one self-contained HTML page: timeline, flame graphs, "
	      "tables\n"
	      "  --version               the version\n",
	      f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "dump"))
		return mt_cmd_guarded(mt_cmd_dump, argc - 2, argv + 2);
	if (!strcmp(argv[1], "run"))
		return mt_cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "report"))
		return mt_cmd_guarded(mt_cmd_report, argc - 2, argv + 2);
	if (!strcmp(argv[1], "flamegraph"))
		return mt_cmd_guarded(mt_cmd_flamegraph, argc - 2, argv + 2);
	if (!strcmp(argv[1], "check"))
		return mt_cmd_guarded(mt_cmd_check, argc - 2, argv + 2);
	if (!strcmp(argv[1], "diff"))
		return mt_cmd_guarded(mt_cmd_diff, argc - 2, argv + 2);
	if (!strcmp(argv[1], "export"))
		return mt_cmd_guarded(mt_cmd_export, argc - 2, argv + 2);
	if (!strcmp(argv[1], "view")) {
#ifdef MT_HAVE_VIEWER
		return mt_cmd_guarded(mt_cmd_view, argc - 2, argv + 2);
#else
		fputs("memtrace view: this memtrace was built without the viewer (it needs node "
		      "and "
		      "`npm ci --prefix viewer` at build time: docs/viewer.md)\n",
		      stderr);
		return MT_EXIT_USAGE;
#endif
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return MT_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("memtrace %s\n", MT_VERSION);
		return MT_EXIT_OK;
	}
	fprintf(stderr, "memtrace: unknown command %s\n", argv[1]);
	usage(stderr);
	return MT_EXIT_USAGE;
}
