/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of analyzer/replay.c with exact figures: realloc's two halves
 * across threads, partial munmap that trims and splits, mremap, fork
 * seeding, unknown frees, how instances end, peaks and per-stack figures,
 * the pages live blocks touch, an ALLOC and its FREE applied at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pystacks.h"
#include "reader.h"
#include "replay.h"
#include "test-common.h"
#include "trace-builder.h"

#define CHUNK 4096u
#define PAGE  4096u

struct run {
	struct mt_trace t;
	struct mt_replay *r;
	uint64_t records_seen;
	uint64_t last_time;
	bool out_of_order;
	/* each instance's per-stack figures, which last as long as its instance_done */
	int (*on_stack)(void *ctx, const struct mt_stack_stats *s);
	void *stack_ctx;
};

static int on_record(void *ctx, const struct mt_instance *in, const struct mt_record *rec)
{
	struct run *run = ctx;

	(void)in;
	run->records_seen++;
	if (mt_record_is_event(rec->type)) {
		if (rec->time < run->last_time)
			run->out_of_order = true;
		run->last_time = rec->time;
	}
	return 0;
}

static int on_done(void *ctx, struct mt_replay *r, const struct mt_instance *in)
{
	struct run *run = ctx;

	run->last_time = 0;
	return run->on_stack ? mt_replay_foreach_stack(r, in, run->on_stack, run->stack_ctx) : 0;
}

/* on_stack, if not NULL, is given each instance's per-stack figures at its end */
static void replay_stacks(struct run *run, struct tb *b,
                          int (*on_stack)(void *ctx, const struct mt_stack_stats *s),
                          void *stack_ctx)
{
	static const struct mt_replay_callbacks cb = {.record = on_record,
	                                              .instance_done = on_done};
	struct mt_error err = {0};

	*run = (struct run){.on_stack = on_stack, .stack_ctx = stack_ctx};
	CHECK_EQ(mt_reader_open_memory(&run->t, b->buf, b->size, &err), 0);
	CHECK_EQ(mt_replay_open(&run->r, &run->t, &err), 0);
	CHECK_EQ(mt_replay_run(run->r, &cb, run, &err), 0);
	if (err.message[0])
		fprintf(stderr, "replay error at %" PRIu64 ": %s\n", err.offset, err.message);
}

static void replay(struct run *run, struct tb *b)
{
	replay_stacks(run, b, NULL, NULL);
}

static void done(struct run *run, struct tb *b)
{
	mt_replay_free(run->r);
	mt_reader_close(&run->t);
	tb_free_buf(b);
}

static const struct mt_kind_stats *host(struct run *run, uint32_t id)
{
	static const struct mt_kind_stats none;
	const struct mt_instance *in = mt_replay_find_instance(run->r, id);

	return in ? &in->kind[MT_KIND_HOST] : &none;
}

static const struct mt_kind_stats *mm(struct run *run, uint32_t id)
{
	static const struct mt_kind_stats none;
	const struct mt_instance *in = mt_replay_find_instance(run->r, id);

	return in ? &in->kind[MT_KIND_MMAP] : &none;
}

/* A trace whose first chunk is thread 100's of process 100 (instance 1), its PROCESS at tick 1. */
static void one_process(struct tb *b)
{
	tb_init(b, CHUNK);
	tb_chunk(b, 1, 100, 100, 0);
	tb_process(b, 1, 100, 1, 0, 0, "/p", "p", 1);
}

/*
 * realloc frees its old block at t0: another thread that gets that address
 * between t0 and t1 must not lose its block when the realloc record (at t1)
 * is replayed.
 */
static void test_realloc(void)
{
	struct run run;
	struct tb b;

	one_process(&b);
	tb_alloc(&b, 5, MT_FN_MALLOC, 0xA000, 100, 1);
	tb_realloc(&b, 20, 10, 0xA000, 0xB000, 200, 2);
	tb_realloc(&b, 30, 25, 0, 0xC000, 7, 3);      /* realloc(NULL, 7) */
	tb_realloc(&b, 40, 35, 0xC000, 0, 0, 3);      /* realloc(p, 0) frees */
	tb_realloc(&b, 50, 45, 0xD000, 0xE000, 5, 3); /* unknown old block */
	tb_exit(&b, 60, MT_EXIT_MAIN_RETURN, 0);
	tb_chunk(&b, 1, 100, 101, 0);
	tb_alloc(&b, 15, MT_FN_MALLOC, 0xA000, 50, 4); /* between t0 and t1 of the first realloc */
	replay(&run, &b);
	CHECK_EQ(host(&run, 1)->allocations, 5);
	CHECK_EQ(host(&run, 1)->frees, 2);
	CHECK_EQ(host(&run, 1)->unknown_frees, 1);
	CHECK_EQ(host(&run, 1)->bytes_allocated, 100 + 200 + 7 + 5 + 50);
	CHECK_EQ(host(&run, 1)->live_bytes, 200 + 50 + 5);
	CHECK_EQ(host(&run, 1)->live_blocks, 3);
	CHECK_EQ(host(&run, 1)->peak_bytes, 257);
	CHECK_EQ(host(&run, 1)->peak_time, 30);
	CHECK(!run.out_of_order);
	CHECK_EQ(run.records_seen, 8);
	done(&run, &b);
}

static void test_munmap_split(void)
{
	const uint64_t m = 0x7f0000000000;
	struct run run;
	struct tb b;

	one_process(&b);
	tb_mmap(&b, 10, m, 8 * PAGE, 1);
	tb_munmap(&b, 20, m + 3 * PAGE, 2 * PAGE); /* the middle: two ranges */
	tb_munmap(&b, 30, m, 100); /* a length rounded up to a page: trims the head */
	tb_munmap(&b, 40, m + 7 * PAGE, 4 * PAGE); /* the tail and beyond */
	tb_munmap(&b, 50, 0x1000, PAGE);           /* nothing of ours */
	tb_mmap(&b, 60, m + 20 * PAGE, 4 * PAGE, 2);
	tb_mremap(&b, 80, 70, m + 20 * PAGE, 4 * PAGE, m + 40 * PAGE, 6 * PAGE,
	          3);                                             /* moves and grows */
	tb_mremap(&b, 90, 85, 0x2000, PAGE, 0x9000, 2 * PAGE, 3); /* a file mapping: ignored */
	tb_mmap(&b, 100, m + 41 * PAGE, PAGE, 4); /* MAP_FIXED over a page of the moved range */
	replay(&run, &b);
	/* after 20: [0,3) [5,8) = 6 pages 2 blocks; 30: [1,3) [5,8) = 5 pages; 40: [1,3) [5,7) = 4
	 * pages */
	CHECK_EQ(mm(&run, 1)->allocations, 3);
	CHECK_EQ(mm(&run, 1)->frees, 3);
	CHECK_EQ(mm(&run, 1)->bytes_allocated, 8 * PAGE + 4 * PAGE + 2 * PAGE + PAGE);
	/* 4 pages in 2 ranges, 6 moved pages now split around the fixed one into 2 ranges, plus it
	 */
	CHECK_EQ(mm(&run, 1)->live_bytes, 4 * PAGE + 6 * PAGE);
	CHECK_EQ(mm(&run, 1)->live_blocks, 2 + 3);
	CHECK_EQ(mm(&run, 1)->peak_bytes, 10 * PAGE); /* once the mremap grew the second mapping */
	CHECK_EQ(mm(&run, 1)->peak_time, 80);
	CHECK_EQ(host(&run, 1)->live_bytes, 0);
	done(&run, &b);
}

struct live_sum {
	uint64_t bytes[MT_KIND_COUNT];
	uint64_t blocks;
	uint64_t from_parent;
};

static int sum_live(void *ctx, const struct mt_block *blk)
{
	struct live_sum *s = ctx;

	s->bytes[blk->kind] += blk->size;
	s->blocks++;
	if (blk->stack_instance == 1)
		s->from_parent++;
	return 0;
}

/* Sums the live blocks of instance 2, the child, into ctx (a struct live_sum). */
static int child_done(void *ctx, struct mt_replay *r, const struct mt_instance *in)
{
	if (in->id == 2)
		mt_replay_foreach_live(r, in, sum_live, ctx);
	return 0;
}

static void test_fork_and_ends(void)
{
	static const struct mt_replay_callbacks cb = {.instance_done = child_done};
	struct live_sum child_live = {0};
	struct mt_error err = {0};
	struct run run;
	struct tb b;

	tb_init(&b, CHUNK);
	/* parent, instance 1, pid 100 */
	tb_chunk(&b, 1, 100, 100, 0);
	tb_process(&b, 1, 100, 1, MT_ORIGIN_ROOT, 0, "/p", "p\0a", 4);
	tb_alloc(&b, 10, MT_FN_MALLOC, 0xA000, 100, 1);
	tb_alloc(&b, 20, MT_FN_MALLOC, 0xB000, 200, 1);
	tb_mmap(&b, 21, 0x7f0000000000, 2 * PAGE, 2);
	/* child, instance 2, pid 200: forked at 25, after the frees below are not seen */
	tb_chunk(&b, 2, 200, 200, 25);
	tb_process(&b, 25, 200, 100, MT_ORIGIN_FORK, 1, "/p", "p", 1);
	tb_free(&b, 40, 0xA000);                       /* inherited */
	tb_alloc(&b, 41, MT_FN_MALLOC, 0xC000, 50, 1); /* the child's stack 1 is not the parent's */
	tb_free(&b, 42, 0xF000);                       /* unknown */
	tb_exit(&b, 50, MT_EXIT_EXIT, 7);
	/* the parent goes on, then execs */
	tb_chunk(&b, 1, 100, 100, 30);
	tb_free(&b, 30, 0xA000);
	tb_free(&b, 31, 0xB000);
	tb_free(&b, 32, 0xB000); /* a double free is an unknown free */
	/* the exec'd program, instance 3, same pid; killed */
	tb_chunk(&b, 3, 100, 100, 60);
	tb_process(&b, 60, 100, 1, MT_ORIGIN_EXEC, 0, "/q", "q", 1);
	tb_alloc(&b, 61, MT_FN_MALLOC, 0xA000, 1, 0);

	memset(&run, 0, sizeof(run));
	CHECK_EQ(mt_reader_open_memory(&run.t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_replay_open(&run.r, &run.t, &err), 0);
	CHECK_EQ(mt_replay_run(run.r, &cb, &child_live, &err), 0);
	CHECK_EQ(mt_replay_instance_count(run.r), 3);

	CHECK_EQ(mt_replay_find_instance(run.r, 1)->end, MT_END_EXEC);
	CHECK_STR(mt_replay_find_instance(run.r, 1)->cmdline, "p a");
	CHECK_EQ(mt_replay_find_instance(run.r, 1)->threads, 1);
	CHECK_EQ(mt_replay_find_instance(run.r, 1)->chunks, 2);
	CHECK_EQ(host(&run, 1)->live_bytes, 0);
	CHECK_EQ(host(&run, 1)->frees, 2);
	CHECK_EQ(host(&run, 1)->unknown_frees, 1);
	CHECK_EQ(host(&run, 1)->peak_bytes, 300);
	CHECK_EQ(mm(&run, 1)->live_bytes, 2 * PAGE);

	CHECK_EQ(mt_replay_find_instance(run.r, 2)->end, MT_END_EXIT);
	CHECK_EQ(mt_replay_find_instance(run.r, 2)->exit_status, 7);
	CHECK_EQ(mt_replay_find_instance(run.r, 2)->exit_how, MT_EXIT_EXIT);
	CHECK_EQ(host(&run, 2)->inherited_bytes, 300);
	CHECK_EQ(host(&run, 2)->inherited_blocks, 2);
	CHECK_EQ(mm(&run, 2)->inherited_bytes, 2 * PAGE);
	CHECK_EQ(host(&run, 2)->frees, 1);
	CHECK_EQ(host(&run, 2)->unknown_frees, 1);
	CHECK_EQ(host(&run, 2)->allocations, 1);
	CHECK_EQ(host(&run, 2)->live_bytes, 250);
	CHECK_EQ(host(&run, 2)->live_blocks, 2);
	CHECK_EQ(host(&run, 2)->peak_bytes, 300);
	CHECK_EQ(child_live.bytes[MT_KIND_HOST], 250);
	CHECK_EQ(child_live.bytes[MT_KIND_MMAP], 2 * PAGE);
	CHECK_EQ(child_live.blocks, 3);
	CHECK_EQ(child_live.from_parent, 2);

	CHECK_EQ(mt_replay_find_instance(run.r, 3)->end, MT_END_KILLED);
	CHECK_EQ(host(&run, 3)->live_bytes, 1);
	CHECK_EQ(host(&run, 3)->inherited_bytes, 0);
	done(&run, &b);
}

struct stack_figures {
	uint64_t live[8], peak[8];
};

static int take_stack(void *ctx, const struct mt_stack_stats *s)
{
	struct stack_figures *f = ctx;

	if (s->kind == MT_KIND_HOST && s->stack < 8) {
		f->live[s->stack] = s->live_bytes;
		f->peak[s->stack] = s->peak_bytes;
	}
	return 0;
}

/*
 * A live block's size has 32 bits in the live set's map: one of 4 GiB or
 * more (or of exactly the 32-bit mark, 4 GiB - 1) keeps its size beside it,
 * through an address handed out again, a realloc, a fork's copy and a free.
 */
static void test_blocks_past_32_bits(void)
{
	static const struct mt_replay_callbacks cb = {.instance_done = child_done};
	const uint64_t gib = 1ull << 30, mark = UINT32_MAX;
	struct live_sum child_live = {0};
	struct mt_error err = {0};
	struct run run;
	struct tb b;

	one_process(&b);
	tb_alloc(&b, 10, MT_FN_MALLOC, 0xA000, 5 * gib, 1);
	tb_alloc(&b, 11, MT_FN_MALLOC, 0xB000, mark, 2);
	tb_alloc(&b, 12, MT_FN_MALLOC, 0xC000, 100, 1);
	tb_alloc(&b, 30, MT_FN_MALLOC, 0xA000, 10, 1); /* its free was lost: the 5 GiB are gone */
	tb_realloc(&b, 35, 33, 0xB000, 0xD000, 6 * gib, 2);
	tb_free(&b, 40, 0xC000);
	tb_exit(&b, 50, MT_EXIT_MAIN_RETURN, 0);
	tb_chunk(&b, 2, 200, 200, 25);
	tb_process(&b, 25, 200, 100, MT_ORIGIN_FORK, 1, "/p", "p", 1);
	tb_free(&b, 41, 0xA000); /* the inherited 5 GiB */
	tb_exit(&b, 45, MT_EXIT_EXIT, 0);
	memset(&run, 0, sizeof(run));
	CHECK_EQ(mt_reader_open_memory(&run.t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_replay_open(&run.r, &run.t, &err), 0);
	CHECK_EQ(mt_replay_run(run.r, &cb, &child_live, &err), 0);
	CHECK_EQ(host(&run, 1)->allocations, 5);
	CHECK_EQ(host(&run, 1)->frees, 2);
	CHECK_EQ(host(&run, 1)->bytes_allocated, 5 * gib + mark + 100 + 10 + 6 * gib);
	CHECK_EQ(host(&run, 1)->live_bytes, 6 * gib + 10);
	CHECK_EQ(host(&run, 1)->live_blocks, 2);
	CHECK_EQ(host(&run, 1)->peak_bytes, 5 * gib + mark + 100);
	CHECK_EQ(host(&run, 1)->peak_time, 12);
	CHECK_EQ(host(&run, 2)->inherited_bytes, 5 * gib + mark + 100);
	CHECK_EQ(host(&run, 2)->inherited_blocks, 3);
	CHECK_EQ(host(&run, 2)->frees, 1);
	CHECK_EQ(host(&run, 2)->live_bytes, mark + 100);
	CHECK_EQ(child_live.bytes[MT_KIND_HOST], mark + 100);
	CHECK_EQ(child_live.blocks, 2);
	done(&run, &b);
}

static int count_stack(void *ctx, const struct mt_stack_stats *s)
{
	(void)s;
	++*(uint64_t *)ctx;
	return 0;
}

static void test_peak_stacks_and_fails(void)
{
	struct stack_figures f = {0};
	uint64_t after = 0;
	const uint64_t frames[] = {0x401000, 0x402000};
	uint64_t fr[MT_MAX_DEPTH];
	uint32_t n;
	struct run run;
	struct tb b;

	one_process(&b);
	tb_stack(&b, 1, 2, frames);
	tb_alloc(&b, 10, MT_FN_MALLOC, 0x1000, 100, 1);
	tb_alloc(&b, 20, MT_FN_MALLOC, 0x2000, 50, 2); /* peak 150: stack 1 100, stack 2 50 */
	tb_free(&b, 30, 0x1000);
	tb_alloc(&b, 40, MT_FN_MALLOC, 0x3000, 60, 2); /* 110: below the peak */
	tb_fail(&b, 50, MT_FN_CALLOC, 1ull << 40, 3, ENOMEM);
	tb_fail(&b, 51, MT_FN_MMAP, 1ull << 30, 3, ENOMEM);
	tb_alloc(&b, 60, MT_FN_MALLOC, 0x4000, 10, 3);
	replay_stacks(&run, &b, take_stack, &f);
	/* they went after the instance_done callback: a trace of many processes holds none */
	CHECK_EQ(mt_replay_foreach_stack(run.r, mt_replay_find_instance(run.r, 1), count_stack,
	                                 &after),
	         0);
	CHECK_EQ(after, 0);
	CHECK_EQ(host(&run, 1)->peak_bytes, 150);
	CHECK_EQ(host(&run, 1)->peak_time, 20);
	CHECK_EQ(f.peak[1], 100);
	CHECK_EQ(f.peak[2], 50);
	CHECK_EQ(f.peak[3], 0);
	CHECK_EQ(f.live[1], 0);
	CHECK_EQ(f.live[2], 110);
	CHECK_EQ(f.live[3], 10);
	CHECK_EQ(host(&run, 1)->failed, 1);
	CHECK_EQ(mm(&run, 1)->failed, 1);
	CHECK_EQ(mt_replay_find_instance(run.r, 1)->nfails, 2);
	CHECK_EQ(mt_replay_find_instance(run.r, 1)->fails[0].size, 1ull << 40);
	CHECK_EQ(mt_replay_find_instance(run.r, 1)->fails[0].fn, MT_FN_CALLOC);
	CHECK_EQ(mt_replay_stack(run.r, 1, 1, fr, &n, NULL), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(fr[1], 0x402000);
	CHECK_EQ(mt_replay_stack(run.r, 1, 9, fr, &n, NULL), -ENOENT);
	done(&run, &b);
}

/* Equal times on two threads: file order decides. Many chunks per thread stream in order. */
static void test_merge_order(void)
{
	struct run run;
	struct tb b;
	uint64_t t = 100;

	one_process(&b);
	tb_alloc(&b, 10, MT_FN_MALLOC, 0x1000, 8, 0);
	tb_chunk(&b, 1, 100, 101, 0);
	tb_free(&b, 10, 0x1000); /* same time, later in the file: after the alloc */
	for (int c = 0; c < 20; c++) {
		tb_chunk(&b, 1, 100, 100 + (uint32_t)(c % 2), t);
		for (int i = 0; i < 100; i++, t++) {
			tb_alloc(&b, t, MT_FN_MALLOC, 0x100000 + (uint64_t)i * 16, 16, 0);
			tb_free(&b, t, 0x100000 + (uint64_t)i * 16);
		}
	}
	replay(&run, &b);
	CHECK_EQ(host(&run, 1)->unknown_frees, 0);
	CHECK_EQ(host(&run, 1)->frees, 2001);
	CHECK_EQ(host(&run, 1)->live_bytes, 0);
	CHECK_EQ(host(&run, 1)->peak_bytes, 16);
	CHECK(!run.out_of_order);
	done(&run, &b);
}

/*
 * An instance whose last record is an EXEC, with no EXIT and no traced
 * program of its pid after it, was replaced by an untraced program; an EXEC
 * that records follow failed and changes nothing; a SAMPLE after it does not
 * count (the sampler may finish one before the kernel ends it).
 */
/*
 * The feed takes a thread's records in a row while they are due before any
 * other thread's (feed.c, run): a record of the same tick as another
 * thread's next one, later in the file, still comes after it. Thread 101's
 * first allocation is due first; its free at tick 10 is of the block
 * thread 100 allocated at tick 10 in an earlier chunk.
 */
static void test_merge_tie_in_a_run(void)
{
	struct run run;
	struct tb b;

	one_process(&b);
	tb_alloc(&b, 10, MT_FN_MALLOC, 0x1000, 8, 0);
	tb_chunk(&b, 1, 100, 101, 0);
	tb_alloc(&b, 5, MT_FN_MALLOC, 0x2000, 16, 0);
	tb_free(&b, 10, 0x1000); /* after thread 100's alloc */
	tb_free(&b, 11, 0x2000);
	replay(&run, &b);
	CHECK_EQ(host(&run, 1)->unknown_frees, 0);
	CHECK_EQ(host(&run, 1)->frees, 2);
	CHECK_EQ(host(&run, 1)->peak_bytes, 24);
	CHECK_EQ(host(&run, 1)->live_bytes, 0);
	CHECK(!run.out_of_order);
	done(&run, &b);
}

static void test_exec_ends(void)
{
	static const uint64_t sample[MT_SAMPLE_FIELD_COUNT] = {4096};
	struct mt_error err = {0};
	const struct mt_instance *in;
	struct run run;
	struct tb b;

	tb_init(&b, CHUNK);
	/* 1: allocates, execs a static program; its sampler's last SAMPLE comes later */
	tb_chunk(&b, 1, 100, 100, 0);
	tb_process(&b, 1, 100, 1, MT_ORIGIN_ROOT, 0, "/p", "p", 1);
	tb_alloc(&b, 10, MT_FN_MALLOC, 0xA000, 100, 0);
	tb_exec(&b, 20, "/bin/static");
	tb_chunk(&b, 1, 100, 101, 21);
	tb_sample(&b, 21, 21, sample, MT_SAMPLE_FIELD_COUNT);
	/* 2: an exec that fails, an allocation after it on another thread, then killed */
	tb_chunk(&b, 2, 200, 200, 0);
	tb_process(&b, 1, 200, 1, MT_ORIGIN_ROOT, 0, "/p", "p", 1);
	tb_exec(&b, 30, "/missing");
	tb_chunk(&b, 2, 200, 201, 5);
	tb_alloc(&b, 31, MT_FN_MALLOC, 0xB000, 10, 0);
	/* 3: fails once, exits */
	tb_chunk(&b, 3, 300, 300, 0);
	tb_process(&b, 1, 300, 1, MT_ORIGIN_ROOT, 0, "/p", "p", 1);
	tb_exec(&b, 40, "/missing");
	tb_exit(&b, 41, MT_EXIT_UNDERSCORE, 127);
	/* 4: fails, then execs a traced program: instance 5 of the same pid */
	tb_chunk(&b, 4, 400, 400, 0);
	tb_process(&b, 1, 400, 1, MT_ORIGIN_ROOT, 0, "/p", "p", 1);
	tb_exec(&b, 50, "/missing");
	tb_alloc(&b, 51, MT_FN_MALLOC, 0xC000, 10, 0);
	tb_exec(&b, 52, "/bin/traced");
	tb_chunk(&b, 5, 400, 400, 60);
	tb_process(&b, 60, 400, 1, MT_ORIGIN_EXEC, 0, "/bin/traced", "traced", 6);

	memset(&run, 0, sizeof(run));
	CHECK_EQ(mt_reader_open_memory(&run.t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_replay_open(&run.r, &run.t, &err), 0);
	CHECK_EQ(mt_replay_run(run.r, NULL, NULL, &err), 0);
	in = mt_replay_find_instance(run.r, 1);
	CHECK_EQ(in->end, MT_END_EXEC_UNTRACED);
	CHECK_STR(in->exec_path, "/bin/static");
	CHECK_STR(mt_end_name(in->end), "exec-untraced");
	CHECK_EQ(host(&run, 1)->live_bytes, 100);
	in = mt_replay_find_instance(run.r, 2);
	CHECK_EQ(in->end, MT_END_KILLED);
	CHECK(!in->exec_path);
	in = mt_replay_find_instance(run.r, 3);
	CHECK_EQ(in->end, MT_END_EXIT);
	CHECK_EQ(in->exit_status, 127);
	CHECK(!in->exec_path);
	in = mt_replay_find_instance(run.r, 4);
	CHECK_EQ(in->end, MT_END_EXEC);
	CHECK_STR(in->exec_path, "/bin/traced");
	CHECK_EQ(mt_replay_find_instance(run.r, 5)->end, MT_END_KILLED);
	done(&run, &b);
}

/*
 * Python frames per stack and code objects per instance: a STACK naming a
 * PYSTACK that comes later, a PYSTACK two STACKs share, a repeat of a
 * STACK, a PYSTACK and a PYCODE (the first wins), a native-only stack, a
 * STACK naming an id no PYSTACK has (no Python frames, no error), a code
 * id no record describes, and another instance's PYSTACK and code of the
 * same ids.
 */
static void expect_frames(const struct mt_replay *r, uint32_t instance, uint32_t id, uint32_t want,
                          const uint64_t *code, const uint64_t *lasti)
{
	const struct mt_pyframe *f;
	uint32_t n = UINT32_MAX;

	CHECK_EQ(mt_replay_pystack(r, instance, id, &f, &n), 0);
	CHECK_EQ(n, want);
	for (uint32_t i = 0; i < n && i < want; i++) {
		CHECK_EQ(f[i].code, code[i] >> 1);
		CHECK_EQ(f[i].entry, code[i] & MT_PYFRAME_ENTRY);
		CHECK_EQ(f[i].lasti, lasti[i]);
	}
}

static void test_python(void)
{
	static const uint64_t native[] = {0x401000, 0x402000};
	static const uint64_t py[] = {7 << 1, 8 << 1 | MT_PYFRAME_ENTRY};
	static const uint64_t py2[] = {9 << 1};
	static const uint64_t lasti[] = {3, 0};
	static const uint64_t lasti2[] = {11};
	const struct mt_pyframe *f;
	const struct mt_pycode *c;
	struct run run;
	struct tb b;
	uint32_t n;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_process(&b, 1000, 100, 1, MT_ORIGIN_ROOT, 0, "/usr/bin/python3", "python3", 7);
	tb_stack_py(&b, 1, 2, native, 5);
	tb_stack_py(&b, 1, 2, native, 6);
	tb_stack(&b, 2, 2, native);
	tb_stack_py(&b, 3, 1, native, 5);
	tb_stack_py(&b, 4, 2, native, 99);
	tb_stack_py(&b, 5, 1, native, 6);
	tb_pystack(&b, 5, 2, py, lasti);
	tb_pystack(&b, 5, 1, py2, lasti2);
	tb_pystack(&b, 6, 1, py2, lasti2);
	tb_pycode(&b, 7, 0x30c, 41, "/app/m.py", "C.f", "\x80\x00", 2);
	tb_pycode(&b, 7, 0x30a, 1, "/other.py", "g", "", 0);
	tb_pycode(&b, 8, 0x30a, 3, "/app/main.py", "<module>", "", 0);
	tb_alloc(&b, 1010, MT_FN_MALLOC, 0x1000, 10, 1);
	tb_alloc(&b, 1020, MT_FN_MALLOC, 0x2000, 20, 4);
	tb_chunk(&b, 2, 200, 200, 1000);
	tb_process(&b, 1000, 200, 1, MT_ORIGIN_ROOT, 0, "/usr/bin/python3", "python3", 7);
	tb_pystack(&b, 5, 1, py2, lasti2);
	tb_stack_py(&b, 1, 2, native, 5);
	tb_stack_py(&b, 2, 2, native, 6);
	tb_pycode(&b, 8, 0x30d, 5, "/b.py", "h", "\x01", 1);
	replay(&run, &b);

	expect_frames(run.r, 1, 1, 2, py, lasti);
	expect_frames(run.r, 1, 3, 2, py, lasti);
	expect_frames(run.r, 1, 5, 1, py2, lasti2);
	expect_frames(run.r, 1, 2, 0, NULL, NULL);
	expect_frames(run.r, 1, 4, 0, NULL, NULL);
	expect_frames(run.r, 2, 1, 1, py2, lasti2);
	expect_frames(run.r, 2, 2, 0, NULL, NULL);
	CHECK_EQ(mt_replay_pystack(run.r, 1, 9, &f, &n), -ENOENT);
	CHECK_EQ(mt_replay_pystack(run.r, 3, 1, &f, &n), -ENOENT);

	c = mt_replay_pycode(run.r, 1, 7);
	CHECK(c != NULL);
	if (c) {
		CHECK_EQ(c->version, 0x30c);
		CHECK_EQ(c->first_line, 41);
		CHECK_STR(c->file, "/app/m.py");
		CHECK_STR(c->name, "C.f");
		CHECK_EQ(c->linetable_len, 2);
		CHECK_EQ(c->linetable[0], 0x80);
		CHECK_EQ(c->linetable_size, 2);
	}
	c = mt_replay_pycode(run.r, 1, 8);
	CHECK(c != NULL && !strcmp(c->name, "<module>"));
	c = mt_replay_pycode(run.r, 2, 8);
	CHECK(c != NULL && !strcmp(c->name, "h") && c->version == 0x30d);
	CHECK(mt_replay_pycode(run.r, 1, 9) == NULL);
	CHECK(mt_replay_pycode(run.r, 1, 0) == NULL);
	done(&run, &b);
}

/*
 * The feed on a thread of its own and on the replay's (feed.h) give the
 * same records in the same order, the same figures, and the same error at
 * the same record: two threads of 84,000 events across chunks, whose
 * blocks the other thread frees and reallocs (a wrong merge shows as
 * unknown frees), then a record cut short in the second thread's last
 * chunk.
 */
#define FEED_PAIRS 40000u

struct order {
	uint64_t seen, hash;
};

static int note_order(void *ctx, const struct mt_instance *in, const struct mt_record *rec)
{
	struct order *o = ctx;

	(void)in;
	o->seen++;
	o->hash = (o->hash ^ rec->offset ^ rec->time << 20 ^ rec->type) * 0x100000001b3ull;
	return 0;
}

static void build_two_threads(struct tb *b, bool corrupt)
{
	uint64_t t = 10;

	tb_init(b, CHUNK);
	tb_chunk(b, 1, 100, 100, 0);
	tb_process(b, 1, 100, 1, 0, 0, "/p", "p", 1);
	for (uint32_t i = 0; i < FEED_PAIRS; i += 100) {
		tb_chunk(b, 1, 100, 100, t);
		for (uint32_t j = i; j < i + 100; j++)
			tb_alloc(b, t + 3 * (j - i), MT_FN_MALLOC, 0x100000 + (uint64_t)j * 32, 32,
			         1 + j % 7);
		tb_chunk(b, 1, 100, 101, t);
		for (uint32_t j = i; j < i + 100; j++) {
			uint64_t at = t + 3 * (j - i);
			if (j % 10 == 0) {
				tb_realloc(b, at + 2, at + 1, 0x100000 + (uint64_t)j * 32,
				           0x9000000 + (uint64_t)j * 64, 64, 9);
				tb_free(b, at + 2, 0x9000000 + (uint64_t)j * 64);
			} else {
				tb_free(b, at + 1, 0x100000 + (uint64_t)j * 32);
			}
		}
		t += 300;
	}
	if (corrupt) {
		tb_dt(b, t);
		tb_u(b, MT_FN_MALLOC); /* an ALLOC that ends after its function */
		tb_end(b, MT_REC_ALLOC);
	}
}

static int replay_with(struct tb *b, enum mt_replay_thread how, struct order *o,
                       struct mt_kind_stats *host_out, struct mt_error *err)
{
	const struct mt_replay_callbacks cb = {.record = note_order};
	struct mt_replay *r;
	struct mt_trace t;
	int ret;

	memset(o, 0, sizeof(*o));
	memset(err, 0, sizeof(*err));
	CHECK_EQ(mt_reader_open_memory(&t, b->buf, b->size, err), 0);
	CHECK_EQ(mt_replay_open(&r, &t, err), 0);
	mt_replay_set_thread(r, how);
	ret = mt_replay_run(r, &cb, o, err);
	*host_out = mt_replay_instance(r, 0)->kind[MT_KIND_HOST];
	mt_replay_free(r);
	mt_reader_close(&t);
	return ret;
}

static void test_feed_thread(void)
{
	struct mt_kind_stats a, n;
	struct mt_error ea, en;
	struct order oa, on;
	struct tb b;

	build_two_threads(&b, false);
	CHECK_EQ(replay_with(&b, MT_REPLAY_THREAD_ALWAYS, &oa, &a, &ea), 0);
	CHECK_EQ(replay_with(&b, MT_REPLAY_THREAD_NEVER, &on, &n, &en), 0);
	CHECK_EQ(oa.seen, 1 + 2 * FEED_PAIRS + FEED_PAIRS / 10);
	CHECK_EQ(oa.seen, on.seen);
	CHECK_EQ(oa.hash, on.hash);
	CHECK_EQ(a.unknown_frees, 0);
	CHECK_EQ(a.frees, FEED_PAIRS + FEED_PAIRS / 10);
	CHECK_EQ(a.allocations, FEED_PAIRS + FEED_PAIRS / 10);
	CHECK_EQ(a.bytes_allocated, 32 * FEED_PAIRS + 64 * (FEED_PAIRS / 10));
	CHECK_EQ(a.peak_bytes, 64);
	CHECK_EQ(a.live_bytes, 0);
	CHECK(!memcmp(&a, &n, sizeof(a)));
	/* the producer stopped wherever it is and its units made on: the same */
	CHECK_EQ(replay_with(&b, MT_REPLAY_THREAD_GIVEN_BACK, &oa, &a, &ea), 0);
	CHECK_EQ(oa.seen, on.seen);
	CHECK_EQ(oa.hash, on.hash);
	CHECK(!memcmp(&a, &n, sizeof(a)));
	tb_free_buf(&b);

	build_two_threads(&b, true);
	CHECK_EQ(replay_with(&b, MT_REPLAY_THREAD_ALWAYS, &oa, &a, &ea), -EBADMSG);
	CHECK_EQ(replay_with(&b, MT_REPLAY_THREAD_NEVER, &on, &n, &en), -EBADMSG);
	CHECK_EQ(oa.seen, on.seen);
	CHECK_EQ(oa.hash, on.hash);
	CHECK_EQ(replay_with(&b, MT_REPLAY_THREAD_GIVEN_BACK, &oa, &a, &ea), -EBADMSG);
	CHECK_EQ(ea.offset, en.offset);
	CHECK(!strcmp(ea.message, en.message));
	CHECK_EQ(oa.seen, 1 + 2 * FEED_PAIRS + FEED_PAIRS / 10); /* every record before it */
	CHECK_EQ(oa.hash, on.hash);
	CHECK_EQ(ea.offset, en.offset);
	CHECK(!strcmp(ea.message, en.message));
	CHECK(strstr(ea.message, "ALLOC record: field 3") != NULL);
	tb_free_buf(&b);
}

/* The bytes of the pages live host blocks touch at instance id's sample i. */
static uint64_t sample_pages(struct run *run, uint32_t id, uint64_t i)
{
	const struct mt_instance *in = mt_replay_find_instance(run->r, id);

	return in && i < in->nsamples ? in->samples[i].host_pages : UINT64_MAX;
}

/*
 * A block's pages are counted at the first sample after it was made, or
 * when the young blocks are as many as the live ones, not when it is made:
 * a block freed before is never counted, nor taken out; one counted is. A
 * block's page is (addr - 8) >> 12 to (addr + size - 1) >> 12.
 */
static void test_heap_pages_young(void)
{
	static const uint64_t sample[MT_SAMPLE_FIELD_COUNT] = {4096};
	uint64_t t = 40;
	struct run run;
	struct tb b;

	one_process(&b);
	tb_alloc(&b, 10, MT_FN_MALLOC, 0x10010, 16, 1); /* young, freed: never counted */
	tb_free(&b, 11, 0x10010);
	tb_alloc(&b, 12, MT_FN_MALLOC, 0x20010, 3 * PAGE, 1); /* pages 0x20 to 0x23 */
	tb_alloc(&b, 13, MT_FN_MALLOC, 0x30010, 16, 1);
	tb_free(&b, 14, 0x30010);
	tb_alloc(&b, 15, MT_FN_MALLOC, 0x30010, 32, 1); /* its address young twice */
	tb_alloc(&b, 16, MT_FN_MALLOC, 0x40010, 16, 1);
	tb_alloc(&b, 17, MT_FN_MALLOC, 0x40010, 32, 1); /* handed out again, young */
	tb_sample(&b, 20, 20, sample, MT_SAMPLE_FIELD_COUNT);
	tb_alloc(&b, 21, MT_FN_MALLOC, 0x23100, 16, 1); /* young, on a counted block's page */
	tb_free(&b, 22, 0x23100);
	tb_alloc(&b, 24, MT_FN_MALLOC, 0x23200, 16, 1); /* the same, handed out again, freed */
	tb_alloc(&b, 25, MT_FN_MALLOC, 0x23200, 16, 1);
	tb_free(&b, 26, 0x23200);
	tb_alloc(&b, 27, MT_FN_MALLOC, 0x40010, 5000, 1); /* handed out again, counted: 0x40-41 */
	tb_sample(&b, 30, 30, sample, MT_SAMPLE_FIELD_COUNT);
	tb_free(&b, 31, 0x20010);
	/* counted when the young blocks outnumber the live ones, then freed */
	tb_alloc(&b, t++, MT_FN_MALLOC, 0x60010, 16, 1);
	for (int i = 0; i < 4100; i++) {
		if (i % 128 == 0)
			tb_chunk(&b, 1, 100, 100, t);
		tb_alloc(&b, t++, MT_FN_MALLOC, 0x70010, 16, 1);
		tb_free(&b, t++, 0x70010);
	}
	tb_free(&b, t++, 0x60010);
	tb_sample(&b, t, t, sample, MT_SAMPLE_FIELD_COUNT);
	tb_exit(&b, t + 1, MT_EXIT_MAIN_RETURN, 0);
	replay(&run, &b);
	CHECK_EQ(sample_pages(&run, 1, 0), 6 * PAGE);
	CHECK_EQ(sample_pages(&run, 1, 1), 7 * PAGE);
	CHECK_EQ(sample_pages(&run, 1, 2), 3 * PAGE);
	CHECK_EQ(host(&run, 1)->live_blocks, 2);
	done(&run, &b);
}

/* A forked child's copy of the live set has its parent's young blocks' pages counted. */
static void test_heap_pages_fork(void)
{
	static const uint64_t sample[MT_SAMPLE_FIELD_COUNT] = {4096};
	struct run run;
	struct tb b;

	one_process(&b);
	tb_alloc(&b, 10, MT_FN_MALLOC, 0xA010, 16, 1);
	tb_alloc(&b, 11, MT_FN_MALLOC, 0xB010, PAGE, 1); /* pages 0xB and 0xC */
	tb_free(&b, 12, 0xA010);                         /* young, not the youngest */
	tb_exit(&b, 40, MT_EXIT_MAIN_RETURN, 0);
	tb_chunk(&b, 2, 200, 200, 20);
	tb_process(&b, 20, 200, 100, MT_ORIGIN_FORK, 1, "/p", "p", 1);
	tb_sample(&b, 30, 30, sample, MT_SAMPLE_FIELD_COUNT);
	tb_free(&b, 31, 0xB010);
	tb_sample(&b, 32, 32, sample, MT_SAMPLE_FIELD_COUNT);
	tb_exit(&b, 33, MT_EXIT_MAIN_RETURN, 0);
	replay(&run, &b);
	CHECK_EQ(host(&run, 2)->inherited_blocks, 1);
	CHECK_EQ(sample_pages(&run, 2, 0), 2 * PAGE);
	CHECK_EQ(sample_pages(&run, 2, 1), 0);
	done(&run, &b);
}

/*
 * A sample keeps the most live around it (traced_max: at it, just before
 * the last change before it, just after the first change after it) and
 * until the next one or the end (traced_until_next).
 */
static void test_sample_traced(void)
{
	static const uint64_t sample[MT_SAMPLE_FIELD_COUNT] = {4096};
	const struct mt_instance *in;
	struct run run;
	struct tb b;

	one_process(&b);
	tb_alloc(&b, 10, MT_FN_MALLOC, 0xA000, 100, 1);
	tb_sample(&b, 20, 20, sample, MT_SAMPLE_FIELD_COUNT);
	tb_alloc(&b, 21, MT_FN_MALLOC, 0xB000, 200, 1); /* the first change after: 300 */
	tb_free(&b, 22, 0xB000);
	tb_sample(&b, 30, 30, sample, MT_SAMPLE_FIELD_COUNT); /* 100 live, 300 before the free */
	tb_alloc(&b, 31, MT_FN_MALLOC, 0xC000, 500, 1);       /* 600 */
	tb_alloc(&b, 32, MT_FN_MALLOC, 0xD000, 1000, 1);      /* 1,600 */
	tb_free(&b, 33, 0xD000);
	tb_free(&b, 34, 0xC000);
	tb_exit(&b, 40, MT_EXIT_MAIN_RETURN, 0);
	replay(&run, &b);
	in = mt_replay_find_instance(run.r, 1);
	CHECK_EQ(in->nsamples, 2);
	CHECK_EQ(in->samples[0].traced_max, 300);
	CHECK_EQ(in->samples[0].traced_until_next, 300);
	CHECK_EQ(in->samples[1].traced_max, 600);
	CHECK_EQ(in->samples[1].traced_until_next, 1600);
	done(&run, &b);
}

/* Every figure a replay leaves, in order: what a replay with pairs must leave the same. */
struct figures {
	uint64_t *v;
	size_t n, cap;
};

static void put(struct figures *f, uint64_t x)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 1024;
		f->v = realloc(f->v, f->cap * sizeof(*f->v));
		CHECK(f->v != NULL);
	}
	f->v[f->n++] = x;
}

static void put128(struct figures *f, mt_u128 x)
{
	put(f, (uint64_t)x);
	put(f, (uint64_t)(x >> 64));
}

static int put_stack(void *ctx, const struct mt_stack_stats *s)
{
	struct figures *f = ctx;
	const uint64_t v[] = {s->stack,           s->stack_instance, s->kind,        s->allocations,
	                      s->bytes_allocated, s->live_bytes,     s->live_blocks, s->peak_bytes,
	                      s->peak_blocks,     s->first_bytes,    s->last};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		put(f, v[i]);
	put128(f, s->t_sy);
	put128(f, s->t_sxy);
	put128(f, s->t_syy);
	put128(f, s->m_sy);
	put128(f, s->m_sxy);
	put128(f, s->m_syy);
	for (int w = 0; w < MT_GROWTH_WINDOWS; w++)
		put(f, s->floor[w]);
	return 0;
}

static int put_block(void *ctx, const struct mt_block *b)
{
	struct figures *f = ctx;

	put(f, b->addr);
	put(f, b->size);
	put(f, b->stack);
	put(f, b->kind);
	put(f, b->blocks);
	return 0;
}

static int figures_done(void *ctx, struct mt_replay *r, const struct mt_instance *in)
{
	struct figures *f = ctx;

	put(f, in->id);
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		const struct mt_kind_stats *s = &in->kind[k];
		const uint64_t v[] = {s->allocations,   s->frees,           s->bytes_allocated,
		                      s->live_bytes,    s->live_blocks,     s->peak_bytes,
		                      s->peak_blocks,   s->peak_time,       s->failed,
		                      s->unknown_frees, s->inherited_bytes, s->inherited_blocks};
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			put(f, v[i]);
	}
	for (uint64_t i = 0; i < in->nsamples; i++) {
		const struct mt_sample_point *sp = &in->samples[i];
		const uint64_t v[] = {
		        sp->time,       sp->live_host,  sp->live_host_blocks, sp->live_mmap,
		        sp->host_pages, sp->traced_max, sp->traced_until_next};
		for (size_t j = 0; j < sizeof(v) / sizeof(v[0]); j++)
			put(f, v[j]);
	}
	for (uint32_t i = 0; i < in->nmarks; i++)
		for (int k = 0; k < MT_KIND_COUNT; k++)
			put(f, in->marks[i].live[k]);
	put(f, in->checkpoints.n);
	put(f, in->checkpoints.first_ns);
	put(f, in->checkpoints.last_x);
	put128(f, in->checkpoints.sx);
	put128(f, in->checkpoints.sxx);
	put(f, in->last_free_size);
	CHECK_EQ(mt_replay_foreach_stack(r, in, put_stack, f), 0);
	return mt_replay_foreach_live(r, in, put_block, f);
}

/* A record callback: the replay then applies each event on its own. */
static int no_pairs(void *ctx, const struct mt_instance *in, const struct mt_record *rec)
{
	(void)ctx;
	(void)in;
	(void)rec;
	return 0;
}

static void replay_figures(struct tb *b, bool pairs, struct figures *f)
{
	const struct mt_replay_callbacks cb = {.record = pairs ? NULL : no_pairs,
	                                       .instance_done = figures_done};
	struct mt_error err = {0};
	struct mt_replay *r;
	struct mt_trace t;

	*f = (struct figures){0};
	CHECK_EQ(mt_reader_open_memory(&t, b->buf, b->size, &err), 0);
	CHECK_EQ(mt_replay_open(&r, &t, &err), 0);
	CHECK_EQ(mt_replay_run(r, &cb, f, &err), 0);
	mt_replay_free(r);
	mt_reader_close(&t);
}

/* The trace's figures replayed with pairs applied at once and one by one: the same. */
static void check_pairs(struct tb *b, const char *what)
{
	struct figures on, off;

	replay_figures(b, true, &on);
	replay_figures(b, false, &off);
	CHECK(on.n > 100);
	CHECK_EQ(on.n, off.n);
	for (size_t i = 0; i < on.n && i < off.n; i++)
		if (on.v[i] != off.v[i]) {
			fprintf(stderr,
			        "%s: figure %zu: %" PRIu64 " with pairs, %" PRIu64 " without\n",
			        what, i, on.v[i], off.v[i]);
			CHECK_EQ(on.v[i], off.v[i]);
			break;
		}
	free(on.v);
	free(off.v);
	tb_free_buf(b);
}

/* Ticks from a short run's last event to its exit: its evenly spaced checkpoints far apart. */
#define LATER 1000000

/* An ALLOC of a kind its function does not say. */
static void alloc_kind(struct tb *b, uint64_t t, uint64_t addr, uint64_t size, uint32_t stack,
                       enum mt_kind kind)
{
	tb_dt(b, t);
	tb_u(b, MT_FN_MALLOC);
	tb_addr(b, addr);
	tb_u(b, size);
	tb_u(b, stack);
	tb_u(b, kind);
	tb_end(b, MT_REC_ALLOC);
}

/* A peak no pair after it reaches (a pair past it goes one by one). */
static void high_peak(struct tb *b, uint64_t *t)
{
	tb_alloc(b, (*t)++, MT_FN_MALLOC, 0xF0000000, 16ull << 30, 30);
	tb_free(b, (*t)++, 0xF0000000);
}

/*
 * An ALLOC and the FREE of its block right after it are applied at once
 * (apply_pair) where that leaves what applying them one by one leaves: the
 * same figures with and without, whatever is around the pairs.
 */
static void test_pairs(void)
{
	static const uint64_t sample[MT_SAMPLE_FIELD_COUNT] = {4096};
	uint64_t t = 10, fork_at = 0, cross_at = 0;
	struct tb b;

	/* a pair past the peak, pairs that reach it, the last event a pair */
	one_process(&b);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xA000, 1000, 1);
	for (int i = 0; i < 6; i++) {
		tb_alloc(&b, t++, MT_FN_MALLOC, 0xB000, i == 5 ? 77 : 100 + (i < 2) * 10, 2);
		tb_free(&b, t++, 0xB000);
	}
	tb_exit(&b, t + LATER, MT_EXIT_MAIN_RETURN, 0);
	check_pairs(&b, "peak");

	/* a pair at a live block's address (its free lost), a big block, a device's */
	one_process(&b);
	high_peak(&b, &t);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xA000, 6ull << 30, 1);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xA000, 10, 2);
	tb_free(&b, t++, 0xA000);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xA000, 5ull << 30, 3);
	tb_free(&b, t++, 0xA000);
	alloc_kind(&b, t++, 0xE000, 64, 4, MT_KIND_CUDA_DEVICE);
	tb_free(&b, t++, 0xE000);
	tb_exit(&b, t + LATER, MT_EXIT_MAIN_RETURN, 0);
	check_pairs(&b, "lost free");

	/* the samples' traced figures: a pair first after a sample, a pair the most after one */
	one_process(&b);
	high_peak(&b, &t);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xA000, 4000, 1);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xB000, 100, 1);
	tb_free(&b, t++, 0xB000);
	tb_sample(&b, t, t, sample, MT_SAMPLE_FIELD_COUNT);
	t++;
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xC000, 300, 2);
	tb_free(&b, t++, 0xC000);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xD000, 1000, 3);
	tb_sample(&b, t, t, sample, MT_SAMPLE_FIELD_COUNT);
	t++;
	tb_free(&b, t++, 0xD000);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xD000, 100, 3);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xC000, 1500, 2);
	tb_free(&b, t++, 0xC000);
	tb_mark(&b, t++, "step");
	tb_alloc(&b, t++, MT_FN_MALLOC, 0xC000, 200, 2);
	tb_free(&b, t++, 0xC000);
	tb_sample(&b, t, t, sample, MT_SAMPLE_FIELD_COUNT);
	tb_exit(&b, t + LATER, MT_EXIT_MAIN_RETURN, 0);
	check_pairs(&b, "samples");

	/*
	 * Blocks kept and pairs in turn: the live set grows through every count, the young list
	 * fills and is caught up (all its blocks young), then samples; pairs across the evenly
	 * spaced checkpoints, the child's fork and another thread's free.
	 */
	one_process(&b);
	high_peak(&b, &t);
	for (int i = 0; i < 9000; i++) {
		uint64_t pair = 0x900000 + 32 * (uint64_t)(i % 7);
		if (i % 128 == 0)
			tb_chunk(&b, 1, 100, 100, t);
		if (i < 5000)
			tb_alloc(&b, t++, MT_FN_MALLOC, 0x1000000 + 64 * (uint64_t)i, 16,
			         8 + i % 5);
		if (i == 4000)
			fork_at = t;
		tb_alloc(&b, t++, MT_FN_MALLOC, pair, 24, 20 + i % 3);
		if (i == 50)
			cross_at = t++; /* freed by thread 101 */
		else
			tb_free(&b, t++, pair);
		if (i == 7000 || i == 8000) {
			tb_sample(&b, t, t, sample, MT_SAMPLE_FIELD_COUNT);
			t++;
		}
	}
	tb_exit(&b, t + 1, MT_EXIT_MAIN_RETURN, 0);
	tb_chunk(&b, 1, 100, 101, 0);
	tb_free(&b, cross_at, 0x900000 + 32 * (50 % 7));
	tb_chunk(&b, 2, 200, 200, 0);
	tb_process(&b, fork_at, 200, 100, MT_ORIGIN_FORK, 1, "/p", "p", 1);
	tb_exit(&b, t + 2, MT_EXIT_MAIN_RETURN, 0);
	check_pairs(&b, "live set");

	/* the last event a pair that would grow the live set (192 blocks fill its 256 slots) */
	one_process(&b);
	high_peak(&b, &t);
	for (uint64_t i = 0; i < 192; i++)
		tb_alloc(&b, t++, MT_FN_MALLOC, 0x100000 + 64 * i, 16, 1);
	tb_alloc(&b, t++, MT_FN_MALLOC, 0x900000, 16, 2);
	tb_free(&b, t++, 0x900000);
	tb_exit(&b, t + LATER, MT_EXIT_MAIN_RETURN, 0);
	check_pairs(&b, "growth");
}

int main(void)
{
	test_realloc();
	test_munmap_split();
	test_fork_and_ends();
	test_peak_stacks_and_fails();
	test_blocks_past_32_bits();
	test_merge_order();
	test_merge_tie_in_a_run();
	test_exec_ends();
	test_python();
	test_feed_thread();
	test_heap_pages_young();
	test_heap_pages_fork();
	test_sample_traced();
	test_pairs();
	if (test_failures)
		fprintf(stderr, "%d checks failed\n", test_failures);
	return test_failures ? 1 : 0;
}
