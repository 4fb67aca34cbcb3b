/* SPDX-License-Identifier: MIT */
/*
 * Writes the fuzzer's hand-made seed traces: `make-seeds DIR`. Each seed is
 * a small valid trace (4096-byte chunks) that reaches one part of the
 * reader or the replay, so the fuzzer starts from inputs that get past the
 * header checks and mutates records the replay actually applies: every
 * record type, realloc and mremap halves across threads, munmap splits,
 * fork seeding, exec, a claimed but unwritten chunk, a cut file, the TSC
 * clock, unknown record types and padded lengths, CUDA kinds, names that
 * are not UTF-8 or hold control characters, the exit's reachability scan.
 *
 * The committed corpus (tests/fuzz/corpus) started from these; run this
 * again only to refresh the seeds (their names are stable: seed-*).
 *
 * May not: be installed; it is a test fixture.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trace-builder.h"

#define CHUNK 4096u

static const char *dir;
static int failed;

static void save(struct tb *b, const char *name, size_t size)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(b->buf, 1, size, f) != size || fclose(f)) {
		perror(path);
		failed = 1;
	}
	tb_free_buf(b);
}

static void module(struct tb *b, uint64_t t, uint64_t base, const char *path)
{
	tb_dt(b, t);
	tb_u(b, base);
	tb_str(b, path, strlen(path));
	tb_str(b, "\x12\x34\x56\x78", 4);
	tb_u(b, 2);
	tb_u(b, 0);
	tb_u(b, 0x1000);
	tb_u(b, 5);
	tb_u(b, 0x2000);
	tb_u(b, 0x800);
	tb_u(b, 6);
	tb_end(b, MT_REC_MODULE);
}

static void sample(struct tb *b, uint64_t t, uint64_t ns, unsigned n)
{
	tb_dt(b, t);
	tb_u(b, ns);
	tb_u(b, n);
	for (unsigned i = 0; i < n; i++)
		tb_u(b, 4096 * (i + 1));
	tb_end(b, MT_REC_SAMPLE);
}

static void lost(struct tb *b, unsigned reason, uint64_t count)
{
	tb_u(b, reason);
	tb_u(b, count);
	tb_end(b, MT_REC_LOST);
}

/* One of every record type in one chunk. */
static void every_record(void)
{
	static const uint64_t frames[] = {0x401234, 0x401000, 0x7f0000001234, 0x400100};
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_process(&b, 1001, 100, 1, MT_ORIGIN_ROOT, 0, "/bin/prog", "prog\0-x\0", 8);
	module(&b, 1002, 0x7f0000000000, "/lib/libc.so.6");
	tb_stack(&b, 1, 4, frames);
	tb_alloc(&b, 1003, MT_FN_MALLOC, 0x10000, 100, 1);
	tb_alloc(&b, 1004, MT_FN_CALLOC, 0x10100, 64, 1);
	tb_free(&b, 1005, 0x10100);
	tb_realloc(&b, 1007, 1006, 0x10000, 0x20000, 400, 1);
	tb_fail(&b, 1008, MT_FN_MALLOC, UINT64_MAX, 1, ENOMEM);
	tb_mmap(&b, 1009, 0x7f1000000000, 4 * 4096, 1);
	tb_munmap(&b, 1010, 0x7f1000001000, 100);
	tb_mremap(&b, 1012, 1011, 0x7f1000002000, 8192, 0x7f2000000000, 16384, 1);
	sample(&b, 1013, 1013, MT_SAMPLE_FIELD_COUNT + 2);
	tb_dt(&b, 1014);
	tb_u(&b, 0x7f0000000000);
	tb_u(&b, 1);
	tb_end(&b, MT_REC_MODULE_GONE);
	lost(&b, MT_LOST_STACK_TABLE_FULL, 3);
	tb_alloc(&b, 1015, MT_FN_MALLOC, 0x30000, 8, 0);
	tb_dt(&b, 1016);
	tb_str(&b, "epoch 1", 7);
	tb_end(&b, MT_REC_MARK);
	tb_exit(&b, 1017, MT_EXIT_MAIN_RETURN, 0);
	save(&b, "every-record", b.size);
}

/* Two threads whose events interleave in time, a realloc's halves between them. */
static void threads(void)
{
	static const uint64_t f1[] = {0x401000}, f2[] = {0x402000, 0x401000};
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 200, 200, 5000);
	tb_process(&b, 5000, 200, 1, MT_ORIGIN_ROOT, 0, "/usr/bin/t", "t", 1);
	tb_stack(&b, 1, 1, f1);
	tb_alloc(&b, 5010, MT_FN_MALLOC, 0x1000, 32, 1);
	tb_realloc(&b, 5040, 5020, 0x1000, 0x2000, 64, 2); /* stack 2 comes from the other thread */
	tb_free(&b, 5060, 0x3000);
	tb_chunk(&b, 1, 200, 201, 5005);
	tb_stack(&b, 2, 2, f2);
	tb_alloc(&b, 5030, MT_FN_MALLOC, 0x3000, 48, 2);
	tb_free(&b, 5050, 0x2000);
	tb_alloc(&b, 5070, MT_FN_POSIX_MEMALIGN, 0x4000, 4096, 2);
	tb_chunk(&b, 1, 200, 200, 6000); /* thread 200's second chunk */
	tb_alloc(&b, 6010, MT_FN_MALLOC, 0x5000, 1, 1);
	tb_exit(&b, 6020, MT_EXIT_EXIT, 1);
	save(&b, "threads", b.size);
}

/* The hot path's short records: a malloc loop on one stack, a step to another, frees, a long
 * ALLOC between them, and the stack register begun again in a new chunk. */
static void short_records(void)
{
	static const uint64_t f1[] = {0x401000}, f2[] = {0x402000, 0x401000};
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 300, 300, 7000);
	tb_process(&b, 7000, 300, 1, MT_ORIGIN_ROOT, 0, "/usr/bin/s", "s", 1);
	tb_stack(&b, 1, 1, f1);
	tb_stack(&b, 200, 2, f2);
	tb_short_malloc(&b, 7010, 0x1000, 32, 1);
	tb_short_malloc(&b, 7020, 0x1040, 32, 1);
	tb_short_free(&b, 7030, 0x1000);
	tb_alloc(&b, 7040, MT_FN_CALLOC, 0x1080, 16, 200);
	tb_short_malloc(&b, 7050, 0x1000, 600, 200);
	tb_short_malloc(&b, 7060, 0x2000, 8, 1);
	tb_chunk(&b, 1, 300, 300, 8000);
	tb_short_malloc(&b, 8010, 0x3000, 8, 1);
	tb_short_free(&b, 8020, 0x1040);
	tb_exit(&b, 8030, MT_EXIT_EXIT, 0);
	save(&b, "short-records", b.size);
}

/* A root that forks a child mid-way and then execs another program. */
static void fork_exec(void)
{
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 300, 300, 100);
	tb_process(&b, 100, 300, 1, MT_ORIGIN_ROOT, 0, "/bin/sh", "sh\0-c\0x", 8);
	tb_alloc(&b, 110, MT_FN_MALLOC, 0x1000, 10, 0);
	tb_mmap(&b, 115, 0x7f0000000000, 8192, 0);
	tb_alloc(&b, 130, MT_FN_MALLOC, 0x2000, 20, 0);
	tb_free(&b, 140, 0x1000);
	tb_chunk(&b, 2, 301, 301, 120);
	tb_process(&b, 120, 301, 300, MT_ORIGIN_FORK, 1, "/bin/sh", "sh", 2);
	tb_free(&b, 125, 0x1000);
	tb_munmap(&b, 126, 0x7f0000000000, 4096);
	tb_exit(&b, 127, MT_EXIT_UNDERSCORE, 0);
	tb_chunk(&b, 3, 300, 300, 150);
	tb_process(&b, 150, 300, 1, MT_ORIGIN_EXEC, 0, "/bin/true", "true", 4);
	tb_alloc(&b, 160, MT_FN_MALLOC, 0x9000, 5, 0);
	lost(&b, MT_LOST_DISABLED, ENOSPC);
	save(&b, "fork-exec", b.size);
}

/* Anonymous mappings: splits, trims, MAP_FIXED over another, mremap in place and moved. */
static void mappings(void)
{
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 400, 400, 10);
	tb_process(&b, 10, 400, 1, MT_ORIGIN_ROOT, 0, "/m", "m", 1);
	tb_mmap(&b, 11, 0x10000000, 10 * 4096, 0);
	tb_munmap(&b, 12, 0x10000000 + 4 * 4096, 2 * 4096);
	tb_munmap(&b, 13, 0x10000000, 4096);
	tb_mmap(&b, 14, 0x10000000 + 8 * 4096, 4 * 4096, 0);
	tb_mremap(&b, 16, 15, 0x10000000 + 4096, 3 * 4096, 0x10000000 + 4096, 6 * 4096, 0);
	tb_mremap(&b, 18, 17, 0x20000000, 4096, 0x30000000, 8192, 0); /* not ours */
	tb_munmap(&b, 19, 0, UINT64_MAX);
	tb_mmap(&b, 20, UINT64_MAX - 4095, 8192, 0);
	tb_exit(&b, 21, MT_EXIT_EXIT, 0);
	save(&b, "mappings", b.size);
}

/* The TSC clock with SAMPLE and EXIT clock pairs. */
static void tsc(void)
{
	struct tb b;

	tb_init(&b, CHUNK);
	((struct mt_file_header *)b.buf)->clock = MT_CLOCK_TSC;
	tb_chunk(&b, 1, 500, 500, 3000000000ull);
	tb_process(&b, 3000000100ull, 500, 1, MT_ORIGIN_ROOT, 0, "/tsc", "tsc", 3);
	tb_alloc(&b, 3000000200ull, MT_FN_MALLOC, 0x1000, 10, 0);
	sample(&b, 3030000000ull, 1000000000ull + 10000000ull, MT_SAMPLE_FIELD_COUNT);
	tb_dt(&b, 3060000000ull);
	tb_u(&b, MT_EXIT_MAIN_RETURN);
	tb_u(&b, 0);
	tb_u(&b, 1000000000ull + 20000000ull);
	tb_end(&b, MT_REC_EXIT);
	save(&b, "tsc", b.size);
}

/* What a reader must take in its stride: unused chunks, unknown types, padded lengths, extra
 * fields. */
static void odd(void)
{
	struct tb b;
	size_t at;

	tb_init(&b, CHUNK);
	tb_chunk_magic(&b, 0, 0, 0, 0, 0);
	tb_chunk(&b, 7, 600, 600, 50);
	tb_process(&b, 50, 600, 1, MT_ORIGIN_ROOT, 0, "", "", 0);
	tb_u(&b, 1);
	tb_u(&b, 2);
	tb_end(&b, 200); /* an unknown type, skipped */
	tb_dt(&b, 51);
	tb_u(&b, MT_FN_MALLOC);
	tb_addr(&b, 0x1000);
	tb_u(&b, 10);
	tb_u(&b, 0);
	tb_u(&b, 99); /* a field this reader does not know */
	tb_end(&b, MT_REC_ALLOC);
	/* a FREE whose length is written in three bytes (padded uleb128) */
	at = b.pos;
	b.buf[at] = MT_REC_FREE;
	b.buf[at + 1] = 0x83;
	b.buf[at + 2] = 0x80;
	b.buf[at + 3] = 0x00;
	b.buf[at + 4] = (uint8_t)mt_zigzag(1);
	b.buf[at + 5] = MT_FN_FREE;
	b.buf[at + 6] = 0; /* address delta 0: the block above */
	b.pos += 7;
	b.time = 52;
	tb_alloc(&b, 60, MT_FN_MALLOC, 0, 10, 0); /* malloc returned NULL */
	tb_free(&b, 61, 0);
	tb_chunk(&b, 8, 601, 601, 70); /* an instance without a PROCESS record */
	tb_alloc(&b, 71, MT_FN_MALLOC, 0x1000, 10, 0);
	save(&b, "odd", b.size);
}

/* CUDA events: device, managed and pinned kinds, a virtual-memory handle, a failure with device
 * figures. */
static void cuda(void)
{
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 800, 800, 1000);
	tb_process(&b, 1000, 800, 1, MT_ORIGIN_ROOT, 0, "/gpu", "gpu", 3);
	tb_alloc(&b, 1001, MT_FN_MALLOC, 0x1000, 64, 0);
	tb_dt(&b, 1002);
	tb_u(&b, MT_FN_CUDA_MALLOC);
	tb_addr(&b, 0x7f0000000000);
	tb_u(&b, 1 << 20);
	tb_u(&b, 0);
	tb_u(&b, MT_KIND_CUDA_DEVICE + 1);
	tb_end(&b, MT_REC_ALLOC);
	tb_dt(&b, 1003);
	tb_u(&b, MT_FN_CUDA_MALLOC_MANAGED);
	tb_addr(&b, 0x7f1000000000);
	tb_u(&b, 4096);
	tb_u(&b, 0);
	tb_u(&b, MT_KIND_CUDA_MANAGED);
	tb_end(&b, MT_REC_ALLOC);
	tb_dt(&b, 1004);
	tb_u(&b, MT_FN_CUDA_MALLOC_HOST);
	tb_addr(&b, 0x2000);
	tb_u(&b, 8192);
	tb_u(&b, 0);
	tb_u(&b, MT_KIND_CUDA_HOST);
	tb_end(&b, MT_REC_ALLOC);
	tb_dt(&b, 1005);
	tb_u(&b, MT_FN_CU_MEM_CREATE);
	tb_addr(&b, 0x2000); /* a handle: the same number as the pinned block, keyed apart */
	tb_u(&b, 2 << 20);
	tb_u(&b, 0);
	tb_u(&b, MT_KIND_CUDA_DEVICE);
	tb_end(&b, MT_REC_ALLOC);
	tb_dt(&b, 1006);
	tb_u(&b, MT_FN_CUDA_FREE);
	tb_addr(&b, 0x7f0000000000);
	tb_u(&b, MT_KIND_CUDA_DEVICE); /* the current device, not the block's */
	tb_end(&b, MT_REC_FREE);
	tb_dt(&b, 1007);
	tb_u(&b, MT_FN_CU_MEM_RELEASE);
	tb_addr(&b, 0x2000);
	tb_u(&b, MT_KIND_CUDA_DEVICE);
	tb_end(&b, MT_REC_FREE);
	tb_dt(&b, 1008);
	tb_u(&b, MT_FN_CUDA_MALLOC);
	tb_u(&b, 1ull << 40);
	tb_u(&b, 0);
	tb_u(&b, 2); /* cudaErrorMemoryAllocation */
	tb_u(&b, MT_KIND_CUDA_DEVICE + 1);
	tb_u(&b, 1ull << 30);
	tb_u(&b, 16ull << 30);
	tb_end(&b, MT_REC_FAIL);
	tb_exit(&b, 1009, MT_EXIT_MAIN_RETURN, 0);
	save(&b, "cuda", b.size);
}

/*
 * Names the commands must escape: Latin-1, a lone continuation byte, an
 * overlong form, a surrogate, a code point above U+10FFFF, C0 and C1
 * controls, terminal escape sequences, backslashes, quotes, a NUL inside
 * argv, next to valid multi-byte characters.
 */
static void names(void)
{
	static const char argv[] = "caf\xe9\0\x80lone\0\xc0\xafover\0\xed\xa0\x80sur\0"
	                           "\xf4\x90\x80\x80"
	                           "big\0\x1b]52;c;x\x07\0";
	static const char mark[] =
	        "\nmemtrace check: ok\x1b[8m\xc2\x9b\x7f\\x41\"\xe2\x82\xac\xf0\x9f\x98\x80";
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 900, 900, 10);
	tb_process(&b, 10, 900, 1, MT_ORIGIN_ROOT, 0, "/opt/caf\xe9/\\bin\"", argv,
	           sizeof(argv) - 1);
	module(&b, 11, 0x7f0000000000, "/lib/\xff\xfe\r\tlib.so");
	tb_dt(&b, 12);
	tb_str(&b, mark, sizeof(mark) - 1);
	tb_end(&b, MT_REC_MARK);
	tb_exit(&b, 13, MT_EXIT_MAIN_RETURN, 0);
	save(&b, "names", b.size);
}

/*
 * Python frames: two activations over two eval frames, a code id never
 * described (0) and one described after the STACK naming it, lasti 0 (not
 * started) and past its table; code objects of 3.10 and 3.12 whose names
 * are Latin-1 and terminal escapes, and a line table cut short of its size.
 * The PYSTACK comes after the first STACK naming it and is shared by a
 * second; a third STACK names a PYSTACK the trace does not hold.
 */
static void python(void)
{
	static const uint64_t native[] = {0x401100, 0x401200, 0x401300, 0x401400};
	static const uint64_t py[] = {1 << 1, 2 << 1 | MT_PYFRAME_ENTRY, 3 << 1,
	                              0 << 1 | MT_PYFRAME_ENTRY};
	static const uint64_t lasti[] = {4, 0, 900, 1};
	/* 3.10: (bytes, line) pairs; 3.12: a one-line-delta entry, a long entry, a no-location */
	static const uint8_t t310[] = {0x06, 0x01, 0x08, 0x80, 0x0a, 0x02};
	static const uint8_t t312[] = {0x80, 0x00, 0xd8, 0x04, 0x08, 0xf2,
	                               0x06, 0x04, 0x10, 0x00, 0x05, 0xf8};
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 950, 950, 10);
	tb_process(&b, 10, 950, 1, MT_ORIGIN_ROOT, 0, "/usr/bin/python3", "python3", 7);
	module(&b, 11, 0x400000, "/usr/bin/python3");
	tb_pycode(&b, 1, 0x30a, 7, "/opt/caf\xe9/m\x1b[8m.py", "f\n\x07", t310, sizeof(t310));
	tb_stack_py(&b, 1, 4, native, 5);
	tb_pystack(&b, 5, 4, py, lasti);
	tb_stack_py(&b, 2, 3, native + 1, 5);
	tb_stack_py(&b, 3, 2, native, 6);
	tb_u(&b, 2);
	tb_u(&b, 0x30c);
	tb_u(&b, 40);
	tb_str(&b, "<frozen runpy>", 14);
	tb_str(&b, "Cls.<locals>.g\xff", 15);
	tb_str(&b, t312, sizeof(t312));
	tb_u(&b, 4000);
	tb_end(&b, MT_REC_PYCODE);
	tb_alloc(&b, 12, MT_FN_MALLOC, 0x10000, 64, 1);
	tb_pycode(&b, 3, 0x30d, 1, "m.py", "<module>", t312, sizeof(t312));
	tb_alloc(&b, 13, MT_FN_MALLOC, 0x20000, 32, 2);
	tb_alloc(&b, 14, MT_FN_MALLOC, 0x30000, 16, 3);
	tb_exit(&b, 15, MT_EXIT_MAIN_RETURN, 0);
	save(&b, "python", b.size);
}

/*
 * The exit's reachability scan: a root whose blocks are classified (one
 * freed after the scan and another allocated at its address, which the
 * scan did not see), and a forked child whose scan wanted memory.
 */
static void reach(void)
{
	static const uint64_t lost[] = {0x10000, 0x30000}, held[] = {0x20000}, maybe[] = {0x40000},
	                      gone[] = {0x50000};
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 960, 960, 10);
	tb_process(&b, 10, 960, 1, MT_ORIGIN_ROOT, 0, "/r", "r", 1);
	for (unsigned i = 0; i < 5; i++)
		tb_alloc(&b, 11 + i, MT_FN_MALLOC, 0x10000 * (i + 1), 48 * (i + 1), 0);
	tb_reach(&b, 30, MT_REACH_DONE, 0, 5, 720, 65536, 1234);
	tb_reach_blocks(&b, MT_REACH_DEFINITE, 2, lost);
	tb_reach_blocks(&b, MT_REACH_REACHABLE, 1, held);
	tb_reach_blocks(&b, MT_REACH_POSSIBLE, 1, maybe);
	tb_reach_blocks(&b, MT_REACH_INDIRECT, 1, gone);
	tb_free(&b, 31, 0x50000);
	tb_alloc(&b, 32, MT_FN_MALLOC, 0x50000, 16, 0);
	tb_exit(&b, 33, MT_EXIT_EXIT, 0);
	tb_chunk(&b, 2, 961, 961, 20);
	tb_process(&b, 20, 961, 960, MT_ORIGIN_FORK, 1, "/r", "r", 1);
	tb_reach(&b, 25, MT_REACH_NO_MEMORY, 1 << 30, 0, 0, 0, 0);
	tb_exit(&b, 26, MT_EXIT_MAIN_RETURN, 0);
	save(&b, "reach", b.size);
}

/* A trace cut inside its last chunk, and one that is only the file header. */
static void cut(void)
{
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 700, 700, 1);
	tb_process(&b, 1, 700, 1, MT_ORIGIN_ROOT, 0, "/c", "c", 1);
	tb_alloc(&b, 2, MT_FN_MALLOC, 0x1000, 10, 0);
	tb_alloc(&b, 3, MT_FN_MALLOC, 0x2000, 10, 0);
	save(&b, "cut", MT_HEADER_SIZE + 60);
	tb_init(&b, CHUNK);
	save(&b, "header-only", b.size);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	every_record();
	threads();
	short_records();
	fork_exec();
	mappings();
	tsc();
	odd();
	cut();
	cuda();
	names();
	python();
	reach();
	return failed;
}
