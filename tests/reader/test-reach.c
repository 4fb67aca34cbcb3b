/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the leak classes (analyzer/reach.c through the whole
 * analysis) on synthetic traces, with exact figures: each live host block
 * in the class its REACH_BLOCKS record names, a block allocated after the
 * scan (at a fresh address, at a scanned block's freed address, a realloc
 * in place) unclassified, the split per stack and the leak ranking, and the
 * reason a process or a kind has no classes: killed, _exit, exec, each
 * status of an unfinished scan, sampled mode, a kind that is not malloc's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "test-common.h"
#include "trace-builder.h"

#define CHUNK 65536u

static struct mt_analysis *analyze(struct tb *b, const char *name)
{
	char path[512];
	struct mt_analysis *a = NULL;
	struct mt_error err = {0};
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "/tmp/test-reach-%d-%s.trace", (int)getpid(), name);
	f = fopen(path, "wb");
	CHECK(f != NULL);
	if (!f)
		return NULL;
	CHECK_EQ(fwrite(b->buf, 1, b->size, f), b->size);
	fclose(f);
	r = mt_analysis_open(&a, path, NULL, &err);
	if (r < 0)
		fprintf(stderr, "%s: %s at %" PRIu64 "\n", name, err.message, err.offset);
	CHECK_EQ(r, 0);
	unlink(path);
	tb_free_buf(b);
	return a;
}

#define CHECK_COUNT(c, bytes_, blocks_)                                                            \
	do {                                                                                       \
		CHECK_EQ((c).bytes, bytes_);                                                       \
		CHECK_EQ((c).blocks, blocks_);                                                     \
	} while (0)

static const struct mt_stack_row *row_of(const struct mt_kind_result *k, uint32_t stack)
{
	for (size_t i = 0; i < k->nrows; i++)
		if (k->rows[i].stack == stack)
			return &k->rows[i];
	return NULL;
}

static const uint64_t frame1[] = {0x401000}, frame2[] = {0x402000}, frame3[] = {0x403000};

/*
 * A root whose scan at t=2000 named every block live then; after it, a
 * block freed and another made at its address, a fresh block, a realloc in
 * place. A child forked before the scan, and killed.
 */
static void test_classes(void)
{
	static const uint64_t definite[] = {0x20000, 0x30000, 0x50000, 0x90000},
	                      indirect[] = {0x30100, 0x30200}, possible[] = {0x40000},
	                      reachable[] = {0x10000};
	char buf[128];
	struct mt_analysis *a;
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_process(&b, 1000, 100, 1, MT_ORIGIN_ROOT, 0, "/r", "r", 1);
	tb_stack(&b, 1, 1, frame1);
	tb_stack(&b, 2, 1, frame2);
	tb_stack(&b, 3, 1, frame3);
	tb_alloc(&b, 1001, MT_FN_MALLOC, 0x10000, 100, 1);
	tb_alloc(&b, 1002, MT_FN_MALLOC, 0x20000, 200, 2);
	tb_alloc(&b, 1003, MT_FN_MALLOC, 0x30000, 48, 3);
	tb_alloc(&b, 1004, MT_FN_MALLOC, 0x30100, 48, 3);
	tb_alloc(&b, 1005, MT_FN_MALLOC, 0x30200, 48, 3);
	tb_alloc(&b, 1006, MT_FN_MALLOC, 0x40000, 64, 1);
	tb_alloc(&b, 1007, MT_FN_MALLOC, 0x50000, 32, 2);
	tb_alloc(&b, 1008, MT_FN_MALLOC, 0x70000, 10, 2);
	tb_free(&b, 1009, 0x70000);
	tb_alloc(&b, 1010, MT_FN_MALLOC, 0x90000, 8, 3);
	tb_mmap(&b, 1011, 0x7f0000000000, 8192, 1);
	tb_reach(&b, 2000, MT_REACH_DONE, 0, 9, 596, 1 << 16, 5000);
	tb_reach_blocks(&b, MT_REACH_DEFINITE, 4, definite);
	tb_reach_blocks(&b, MT_REACH_INDIRECT, 2, indirect);
	tb_reach_blocks(&b, MT_REACH_POSSIBLE, 1, possible);
	tb_reach_blocks(&b, MT_REACH_REACHABLE, 1, reachable);
	tb_free(&b, 2001, 0x50000);
	tb_alloc(&b, 2002, MT_FN_MALLOC, 0x50000, 16, 2);
	tb_alloc(&b, 2003, MT_FN_MALLOC, 0x60000, 24, 1);
	tb_realloc(&b, 2005, 2004, 0x90000, 0x90000, 12, 3);
	tb_exit(&b, 2006, MT_EXIT_EXIT, 0);
	tb_chunk(&b, 2, 101, 101, 1500);
	tb_process(&b, 1500, 101, 100, MT_ORIGIN_FORK, 1, "/r", "r", 1);
	tb_free(&b, 1501, 0x10000);
	a = analyze(&b, "classes");
	if (!a)
		return;
	CHECK_EQ(a->nprocs, 2);
	{
		const struct mt_process_result *p = &a->procs[0];
		const struct mt_kind_result *k = &p->kind[MT_KIND_HOST];
		const struct mt_stack_row *r;

		CHECK(p->reach.seen);
		CHECK_EQ(p->reach.status, MT_REACH_DONE);
		CHECK_EQ(p->reach.time, 2000);
		CHECK_EQ(p->reach.blocks, 9);
		CHECK_EQ(p->reach.bytes, 596);
		CHECK_EQ(p->reach.scanned, 1 << 16);
		CHECK_EQ(p->reach.ns, 5000);
		CHECK(mt_reach_missing(p->in, &p->reach, MT_KIND_HOST, buf, sizeof(buf)) == NULL);
		CHECK(k->classified);
		CHECK_EQ(k->leaked_bytes, 100 + 200 + 3 * 48 + 64 + 16 + 24 + 12);
		CHECK_EQ(k->leaked_blocks, 9);
		CHECK_COUNT(k->leak_kinds[MT_LEAK_DEFINITE], 200 + 48, 2);
		CHECK_COUNT(k->leak_kinds[MT_LEAK_INDIRECT], 96, 2);
		CHECK_COUNT(k->leak_kinds[MT_LEAK_POSSIBLE], 64, 1);
		CHECK_COUNT(k->leak_kinds[MT_LEAK_REACHABLE], 100, 1);
		CHECK_COUNT(k->leak_kinds[MT_LEAK_UNCLASSIFIED], 16 + 24 + 12, 3);

		r = row_of(k, 1);
		CHECK(r != NULL);
		if (r) {
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_DEFINITE), 0, 0);
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_POSSIBLE), 64, 1);
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_REACHABLE), 100, 1);
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_UNCLASSIFIED), 24, 1);
		}
		r = row_of(k, 2);
		CHECK(r != NULL);
		if (r) {
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_DEFINITE), 200, 1);
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_UNCLASSIFIED), 16, 1);
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_REACHABLE), 0, 0);
		}
		r = row_of(k, 3);
		CHECK(r != NULL);
		if (r) {
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_DEFINITE), 48, 1);
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_INDIRECT), 96, 2);
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_UNCLASSIFIED), 12, 1);
		}
		/* leaks rank by what is lost (216, 156, 24 bytes), not by what is live (216,
		 * 156, 188) */
		{
			struct mt_stack_row rows[3] = {*row_of(k, 1), *row_of(k, 2), *row_of(k, 3)};
			mt_stack_rows_sort(rows, 3, MT_METRIC_LEAKED);
			CHECK_EQ(rows[0].stack, 2);
			CHECK_EQ(rows[1].stack, 3);
			CHECK_EQ(rows[2].stack, 1);
		}
		/* the mapping is live and not classified: all of it unclassified */
		k = &p->kind[MT_KIND_MMAP];
		CHECK(!k->classified);
		CHECK_COUNT(k->leak_kinds[MT_LEAK_UNCLASSIFIED], 8192, 1);
		CHECK_STR(mt_reach_missing(p->in, &p->reach, MT_KIND_MMAP, buf, sizeof(buf)),
		          "not a malloc-family kind: only malloc's blocks are classified");
		CHECK_STR(mt_reach_missing(p->in, &p->reach, MT_KIND_CUDA_DEVICE + 2, buf,
		                           sizeof(buf)),
		          "not a malloc-family kind: device pointers are not scanned");
		r = row_of(k, 1);
		CHECK(r != NULL);
		if (r)
			CHECK_COUNT(mt_stack_row_reach(r, MT_LEAK_UNCLASSIFIED), 8192, 1);
	}
	{
		/* the killed child: its live blocks (inherited ones too) as before, unclassified */
		const struct mt_process_result *p = &a->procs[1];
		const struct mt_kind_result *k = &p->kind[MT_KIND_HOST];

		CHECK(!p->reach.seen);
		CHECK(!k->classified);
		CHECK_EQ(k->leaked_bytes, 200 + 3 * 48 + 64 + 32 + 8);
		CHECK_COUNT(k->leak_kinds[MT_LEAK_UNCLASSIFIED], 200 + 3 * 48 + 64 + 32 + 8, 7);
		CHECK_COUNT(k->leak_kinds[MT_LEAK_DEFINITE], 0, 0);
		CHECK_STR(mt_reach_missing(p->in, &p->reach, MT_KIND_HOST, buf, sizeof(buf)),
		          "killed");
	}
	mt_analysis_free(a);
}

/* A root that ends one way, with a REACH of `status` (none when status < 0). */
static const char *reason(int status, uint64_t detail, unsigned how, bool exec)
{
	static char buf[128], out[128];
	struct mt_analysis *a;
	const char *why;
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_process(&b, 1000, 100, 1, MT_ORIGIN_ROOT, 0, "/r", "r", 1);
	tb_alloc(&b, 1001, MT_FN_MALLOC, 0x10000, 100, 0);
	if (status >= 0)
		tb_reach(&b, 1002, (unsigned)status, detail, 1, 100, 0, 0);
	if (exec) {
		tb_exec(&b, 1003, "/bin/true");
		tb_chunk(&b, 2, 100, 100, 1004);
		tb_process(&b, 1004, 100, 1, MT_ORIGIN_EXEC, 0, "/bin/true", "true", 4);
	}
	if (how)
		tb_exit(&b, 1005, how, 0);
	a = analyze(&b, "reason");
	if (!a)
		return "";
	CHECK(!a->procs[0].kind[MT_KIND_HOST].classified);
	why = mt_reach_missing(a->procs[0].in, &a->procs[0].reach, MT_KIND_HOST, buf, sizeof(buf));
	snprintf(out, sizeof(out), "%s", why ? why : "(classified)");
	mt_analysis_free(a);
	return out;
}

static void test_reasons(void)
{
	CHECK_STR(reason(-1, 0, 0, false), "killed");
	CHECK_STR(reason(-1, 0, MT_EXIT_UNDERSCORE, false), "_exit: no exit handler ran");
	CHECK_STR(reason(-1, 0, MT_EXIT_EXIT, false), "no scan in the trace");
	CHECK_STR(reason(-1, 0, MT_EXIT_EXIT, true),
	          "exec: the kernel dropped the heap, nothing leaked");
	CHECK_STR(reason(MT_REACH_OFF, 0, MT_EXIT_EXIT, false),
	          "turned off (MEMTRACE_REACHABILITY=0)");
	CHECK_STR(reason(MT_REACH_NO_MEMORY, 123456789, MT_EXIT_EXIT, false),
	          "not enough memory for the scan: 123456789 bytes");
	CHECK_STR(reason(MT_REACH_FAILED, 9, MT_EXIT_EXIT, false), "the scan failed: signal 9");
	CHECK_STR(reason(MT_REACH_FAILED, 256 + 3, MT_EXIT_EXIT, false),
	          "the scan failed: exit code 3");
	CHECK_STR(reason(MT_REACH_NO_TRACE, ENOENT, MT_EXIT_EXIT, false),
	          "the scan could not read the trace back: No such file or directory");
	CHECK_STR(reason(MT_REACH_TOO_MANY, 70000000, MT_EXIT_EXIT, false),
	          "too many live blocks for the scan: 70000000");
	CHECK_STR(reason(MT_REACH_TIMEOUT, 10000, MT_EXIT_EXIT, false),
	          "the scan ran out of time: 10000 ms (MEMTRACE_REACHABILITY_MS)");
	CHECK_STR(reason(9, 0, MT_EXIT_EXIT, false),
	          "a scan status this memtrace does not know: 9");
}

/* A sampled process writes an OFF REACH: the reason is sampled mode, not the setting. */
static void test_sampled(void)
{
	char buf[128];
	struct mt_analysis *a;
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_dt(&b, 1000);
	tb_u(&b, 100);
	tb_u(&b, 1);
	tb_u(&b, MT_ORIGIN_ROOT);
	tb_u(&b, 0);
	tb_u(&b, 1700000000000000000ull);
	tb_str(&b, "/r", 2);
	tb_str(&b, "r", 1);
	tb_u(&b, 64);
	tb_u(&b, 524288); /* the sampling interval */
	tb_end(&b, MT_REC_PROCESS);
	tb_alloc(&b, 1001, MT_FN_MALLOC, 0x10000, 100, 0);
	tb_reach(&b, 1002, MT_REACH_OFF, 0, 0, 0, 0, 0);
	tb_exit(&b, 1003, MT_EXIT_EXIT, 0);
	a = analyze(&b, "sampled");
	if (!a)
		return;
	CHECK_EQ(a->procs[0].in->sampling, 524288);
	CHECK(!a->procs[0].kind[MT_KIND_HOST].classified);
	CHECK_STR(mt_reach_missing(a->procs[0].in, &a->procs[0].reach, MT_KIND_HOST, buf,
	                           sizeof(buf)),
	          "off in sampled mode: the scan needs every live block");
	mt_analysis_free(a);
}

int main(void)
{
	test_classes();
	test_reasons();
	test_sampled();
	if (test_failures)
		fprintf(stderr, "%d checks failed\n", test_failures);
	return test_failures ? 1 : 0;
}
