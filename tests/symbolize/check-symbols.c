/* SPDX-License-Identifier: MIT */
/*
 * Checks the symbolizer on a trace of one of programs/: finds allocations
 * by their size, symbolizes every frame of their stacks and compares
 * function names, file basenames, line numbers (read from the source's
 * line:NAME markers, so nothing depends on the build) and inlined chains.
 *
 *   check-symbols MODE TRACE SOURCE [MODULE]
 *
 * MODE: c, stripped, inline, cxx, or gone (MODULE, the program's traced
 * path, was since replaced by another build or deleted: module+offset only).
 * Prints what failed and exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"
#include "replay.h"
#include "symbolize.h"

#define MAX_FRAMES 2048

struct alloc {
	uint64_t size;
	uint32_t stack;
	uint32_t instance;
};

static struct mt_trace trace;
static struct mt_replay *replay;
static struct mt_symbolizer *sym;
static struct alloc allocs[4096];
static size_t nallocs;
static const char *source;
static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static int on_record(void *ctx, const struct mt_instance *in, const struct mt_record *rec)
{
	(void)ctx;
	if (rec->type == MT_REC_ALLOC && nallocs < sizeof(allocs) / sizeof(allocs[0]))
		allocs[nallocs++] = (struct alloc){rec->u.alloc.size, (uint32_t)rec->u.alloc.stack,
						   in->id};
	return 0;
}

/* The line of the source that holds "line:NAME". */
static uint32_t marker(const char *name)
{
	char want[128], buf[4096];
	uint32_t line = 0, found = 0;
	FILE *f = fopen(source, "r");

	if (!f) {
		fprintf(stderr, "cannot read %s\n", source);
		exit(1);
	}
	snprintf(want, sizeof(want), "line:%s ", name);
	while (fgets(buf, sizeof(buf), f)) {
		line++;
		if (strstr(buf, want))
			found = line;
	}
	fclose(f);
	if (!found) {
		fprintf(stderr, "no marker line:%s in %s\n", name, source);
		exit(1);
	}
	return found;
}

static const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path;
}

static bool same(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* All source frames of the stack of the one allocation of `size`. */
static unsigned frames_of(uint64_t size, struct mt_sym *out, const struct mt_instance **inp)
{
	const struct alloc *a = NULL;
	const struct mt_instance *in;
	uint64_t frames[MT_MAX_DEPTH];
	uint32_t n, gen;
	unsigned k = 0;

	for (size_t i = 0; i < nallocs; i++) {
		if (allocs[i].size == size) {
			CHECK(!a, "two allocations of %llu bytes", (unsigned long long)size);
			a = &allocs[i];
		}
	}
	if (!a) {
		fprintf(stderr, "no allocation of %llu bytes in the trace\n", (unsigned long long)size);
		exit(1);
	}
	in = mt_replay_find_instance(replay, a->instance);
	if (!in || mt_replay_stack(replay, a->instance, a->stack, frames, &n, &gen) != 0) {
		fprintf(stderr, "stack %u of the %llu-byte allocation not found\n", a->stack,
			(unsigned long long)size);
		exit(1);
	}
	for (uint32_t i = 0; i < n && k < MAX_FRAMES; i++) {
		struct mt_sym again[8];
		int r = mt_symbolize(sym, in, frames[i], out + k, MAX_FRAMES - k);

		CHECK(r >= 1, "mt_symbolize: %d", r);
		if (r < 1)
			exit(1);
		/* Cached: the same strings, the same frames. */
		CHECK(mt_symbolize(sym, in, frames[i], again, 8) == (r < 8 ? r : 8) &&
			      again[0].function == out[k].function && again[0].file == out[k].file,
		      "a second lookup differs");
		for (int j = 0; j < r; j++) {
			CHECK(out[k + j].address == frames[i], "address");
			CHECK(out[k + j].inlined == (j < r - 1), "inlined flag of frame %d of %d", j, r);
		}
		k += (unsigned)r;
	}
	*inp = in;
	return k;
}

static void print_frames(const struct mt_sym *f, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		fprintf(stderr, "  #%u %s %s:%u%s [%s+0x%llx]\n", i,
			f[i].function ? f[i].function : "??", f[i].file ? base_name(f[i].file) : "??",
			f[i].line, f[i].inlined ? " (inlined)" : "",
			f[i].module ? f[i].module : "??", (unsigned long long)f[i].offset);
}

static void expect(const struct mt_sym *f, unsigned n, unsigned i, const char *function,
		   const char *file, const char *line_marker, bool inlined)
{
	uint32_t line = line_marker ? marker(line_marker) : 0;

	if (i >= n) {
		CHECK(0, "frame %u missing (want %s)", i, function);
		return;
	}
	CHECK(same(f[i].function, function), "frame %u: function %s, want %s", i,
	      f[i].function ? f[i].function : "NULL", function ? function : "NULL");
	CHECK(same(base_name(f[i].file), file), "frame %u: file %s, want %s", i,
	      f[i].file ? f[i].file : "NULL", file ? file : "NULL");
	CHECK(f[i].line == line, "frame %u: line %u, want %u", i, f[i].line, line);
	CHECK(f[i].inlined == inlined, "frame %u: inlined %d, want %d", i, f[i].inlined, inlined);
}

static bool starts_with(const char *s, const char *prefix)
{
	return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/*
 * The frame after main is libc's; with libc6-dbg (or its .symtab) it has a
 * name. The preload's main_wrapper, if it is on the stack, is skipped.
 */
static void expect_libc_caller(const struct mt_sym *f, unsigned n, unsigned i)
{
	while (i < n && starts_with(base_name(f[i].module), "libmemtrace.so"))
		i++;
	CHECK(i < n && starts_with(base_name(f[i].module), "libc.so"), "frame %u is not in libc",
	      i);
	if (i < n && f[i].function)
		CHECK(same(f[i].function, "__libc_start_call_main"),
		      "frame %u: function %s, want __libc_start_call_main", i, f[i].function);
}

static void check_c(bool stripped)
{
	static struct mt_sym f[MAX_FRAMES];
	const struct mt_instance *in;
	const char *file = stripped ? NULL : "sym-c.c";
	unsigned n = frames_of(4321, f, &in);

	expect(f, n, 0, "inner", file, stripped ? NULL : "c_malloc", false);
	expect(f, n, 1, "outer", file, stripped ? NULL : "c_inner", false);
	expect(f, n, 2, "main", file, stripped ? NULL : "c_outer", false);
	expect_libc_caller(f, n, 3);
	CHECK(n > 0 && same(f[0].module, in->exe), "module %s, want %s", n ? f[0].module : "",
	      in->exe);
	if (failures)
		print_frames(f, n);

	n = frames_of(100, f, &in);
	CHECK(n >= 2 && starts_with(base_name(f[0].module), "libc.so") &&
		      (same(f[0].function, "strdup") || same(f[0].function, "__strdup")),
	      "frame 0: want strdup in libc");
	expect(f, n, 1, "main", file, stripped ? NULL : "c_strdup", false);
	if (failures)
		print_frames(f, n);
}

static void check_inline(void)
{
	static struct mt_sym f[MAX_FRAMES];
	const struct mt_instance *in;
	unsigned n = frames_of(5002, f, &in);

	expect(f, n, 0, "leaf", "sym-inline.c", "i_leaf", true);
	expect(f, n, 1, "mid", "sym-inline.c", "i_mid", true);
	expect(f, n, 2, "outer_fn", "sym-inline.c", "i_outer", false);
	expect(f, n, 3, "main", "sym-inline.c", "i_main", false);
	expect_libc_caller(f, n, 4);
	if (failures)
		print_frames(f, n);
}

static void check_cxx(void)
{
	static struct mt_sym f[MAX_FRAMES];
	const struct mt_instance *in;
	unsigned n = frames_of(5600, f, &in), i = 0;

	/* libstdc++ without its debug file: the name from .dynsym, demangled. */
	CHECK(n > 0 && same(f[0].function, "operator new(unsigned long)") &&
		      starts_with(base_name(f[0].module), "libstdc++"),
	      "frame 0: want operator new(unsigned long) in libstdc++");
	while (i < n && starts_with(base_name(f[i].module), "libstdc++"))
		i++;
	expect(f, n, i, "ns::Holder<long>::make(int)", "sym-cxx.cc", "x_new", false);
	expect(f, n, i + 1, "main", "sym-cxx.cc", "x_make", false);
	if (failures)
		print_frames(f, n);

	n = frames_of(333, f, &in);
	for (i = 0; i < n; i++)
		if (same(f[i].function, "std::vector<Big, std::allocator<Big> >::push_back(Big const&)"))
			break;
	CHECK(i < n, "no frame std::vector<Big, std::allocator<Big> >::push_back(Big const&)");
	CHECK(i < n && same(base_name(f[i].file), "stl_vector.h") && f[i].line > 0,
	      "push_back's file");
	expect(f, n, i + 1, "main", "sym-cxx.cc", "x_push", false);
	if (failures)
		print_frames(f, n);
}

static void check_gone(const char *module)
{
	static struct mt_sym f[MAX_FRAMES];
	const struct mt_instance *in;
	unsigned n = frames_of(4321, f, &in);
	const struct mt_module *m = NULL;

	for (uint32_t i = 0; i < in->nmodules; i++)
		if (strcmp(in->modules[i].path, module) == 0)
			m = &in->modules[i];
	CHECK(m, "module %s not in the trace", module);
	for (unsigned i = 0; i < 3 && m; i++) {
		CHECK(i < n && f[i].function == NULL && f[i].file == NULL && f[i].line == 0,
		      "frame %u: a name for a module that is gone or changed", i);
		CHECK(i < n && same(f[i].module, module), "frame %u: module", i);
		CHECK(i < n && f[i].offset == f[i].address - m->base, "frame %u: offset", i);
	}
	/* The rest of the process still has names. */
	expect_libc_caller(f, n, 3);
	CHECK(n > 3 && f[n - 2].function && starts_with(base_name(f[n - 2].module), "libc.so"),
	      "libc frame without a name");
	if (failures)
		print_frames(f, n);
}

int main(int argc, char **argv)
{
	struct mt_replay_callbacks cb = {.record = on_record};
	struct mt_error err;
	const char *mode;
	int r;

	if (argc < 4 || (strcmp(argv[1], "gone") == 0 && argc < 5)) {
		fprintf(stderr, "usage: check-symbols c|stripped|inline|cxx|gone TRACE SOURCE [MODULE]\n");
		return 2;
	}
	mode = argv[1];
	source = argv[3];
	if ((r = mt_reader_open(&trace, argv[2], &err)) < 0 ||
	    (r = mt_replay_open(&replay, &trace, &err)) < 0 ||
	    (r = mt_replay_run(replay, &cb, NULL, &err)) < 0) {
		fprintf(stderr, "%s: %s at offset %llu (%s)\n", argv[2], err.message,
			(unsigned long long)err.offset, strerror(-r));
		return 1;
	}
	if (mt_symbolizer_new(&sym) < 0)
		return 1;
	if (strcmp(mode, "c") == 0)
		check_c(false);
	else if (strcmp(mode, "stripped") == 0)
		check_c(true);
	else if (strcmp(mode, "inline") == 0)
		check_inline();
	else if (strcmp(mode, "cxx") == 0)
		check_cxx();
	else if (strcmp(mode, "gone") == 0)
		check_gone(argv[4]);
	else
		failures++;
	mt_symbolizer_free(sym);
	mt_replay_free(replay);
	mt_reader_close(&trace);
	return failures ? 1 : 0;
}
