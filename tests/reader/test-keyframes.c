/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of a ring's reading (analyzer/keyframes.c and the replay
 * from a keyframe): one run written twice, in full and as a ring would
 * keep it (its first chunk given back, its definitions copied, a keyframe
 * of the moment in between, a realloc whose old half the keyframe holds,
 * short records before and after it),
 * gives the same totals, peak, per-stack figures and live set, to the
 * byte; a keyframe that is not whole is not used.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keyframes.h"
#include "reader.h"
#include "replay.h"
#include "test-common.h"
#include "trace-builder.h"

#define CHUNK 4096u
#define W     1065u /* the keyframe's moment */
#define MAP   0x7f0000000000ull

static const uint64_t frames1[] = {0x401000, 0x400100}, frames2[] = {0x402000, 0x400100};

/* Thread 101's first chunk: the definitions and what it did before W. */
static void first_chunk(struct tb *b)
{
	tb_chunk(b, 1, 100, 101, 1000);
	tb_process(b, 1000, 100, 1, 0, 0, "/p", "p", 1);
	tb_stack(b, 1, 2, frames1);
	tb_stack(b, 2, 2, frames2);
	tb_alloc(b, 1010, MT_FN_MALLOC, 0x1000, 100, 1); /* A, freed by 102 */
	tb_alloc(b, 1015, MT_FN_MALLOC, 0x6000, 64, 1);  /* G, leaked */
	tb_alloc(b, 1020, MT_FN_MALLOC, 0x2000, 200, 2); /* B */
	tb_realloc(b, 1040, 1030, 0x2000, 0x3000, 300, 2);
	tb_mmap(b, 1050, MAP, 8192, 1);
}

/* Thread 102 (seq 1), then thread 101's second chunk (seq 2), whose records come after W. */
static void later_chunks(struct tb *b, size_t *realloc_at)
{
	static const uint64_t values[MT_SAMPLE_FIELD_COUNT] = {[MT_SAMPLE_RSS] = 1 << 20};

	tb_chunk(b, 1, 100, 102, 1055);
	/* a sample the keyframe holds (before the resume point, read before any event of the
	 * chunk), then one after it */
	tb_sample(b, 1056, 1056, values, MT_SAMPLE_FIELD_COUNT);
	tb_free(b, 1060, 0x1000);
	/* a temporary in short records: the keyframe holds them, and the stack register they set
	 * is the one the SHORT_MALLOC_SAME after the keyframe reads */
	tb_short_malloc(b, 1061, 0x8000, 24, 1);
	tb_short_free(b, 1062, 0x8000);
	*realloc_at = tb_realloc(b, 1100, 1063, 0x3000, 0x7000, 400, 2) - b->chunk;
	tb_short_malloc(b, 1105, 0x8100, 24, 1);        /* F, leaked */
	tb_sample(b, 1106, 1106, values, MT_SAMPLE_FIELD_COUNT);
	tb_alloc(b, 1110, MT_FN_MALLOC, 0x4000, 50, 1); /* D */
	tb_chunk(b, 1, 100, 101, 1115);
	tb_alloc(b, 1120, MT_FN_MALLOC, 0x5000, 1000, 2); /* E: the peak */
	tb_free(b, 1130, 0x4000);
	tb_exit(b, 1200, MT_EXIT_MAIN_RETURN, 0);
}

/* The consumer's chunks: the first chunk's definitions copied, and round 1's keyframe. */
static void consumer_chunks(struct tb *b, size_t realloc_at, bool whole)
{
	static const uint64_t kinds[2 * TB_KIND_VALUES] = {
	        MT_KIND_HOST, 5, 4, 688,  464,  3, 1040, 0, 0, 0, 0,
	        MT_KIND_MMAP, 1, 0, 8192, 8192, 1, 1050, 0, 0, 0, 0,
	};
	/* thread 101 held whole to the end of its first chunk (seq 0); 102 to its realloc's
	 * first half */
	const uint64_t threads[2 * MT_KT_FIELDS] = {101, 0, CHUNK, 0, 102, 1, realloc_at, 1};
	static const uint64_t blocks[MT_KB_FIELDS] = {0x6000, 64, 1, 1, MT_KIND_HOST, 1};
	static const uint64_t ranges[MT_KR_FIELDS] = {MAP, 8192, 1, 1};
	static const uint64_t stacks[3 * MT_KS_FIELDS] = {
	        MT_KIND_HOST, 1, 1, 3, 188,  164,  2, MT_KIND_HOST, 1, 2, 2, 500, 300, 1,
	        MT_KIND_MMAP, 1, 1, 1, 8192, 8192, 1,
	};
	const uint64_t counts[4] = {2, 1, 1, 3};

	tb_chunk(b, 0, 99, 1, 1070);
	tb_copy(b, 1, 0);
	tb_process(b, 1000, 100, 1, 0, 0, "/p", "p", 1);
	tb_stack(b, 1, 2, frames1);
	tb_stack(b, 2, 2, frames2);
	tb_chunk(b, 0, 99, 2, 1070);
	tb_keyframe(b, 1, 1, W, 9, counts, 2, kinds);
	tb_key_items(b, MT_REC_KEY_THREADS, 2, MT_KT_FIELDS, threads);
	tb_key_items(b, MT_REC_KEY_BLOCKS, 1, MT_KB_FIELDS, blocks);
	tb_key_items(b, MT_REC_KEY_RANGES, 1, MT_KR_FIELDS, ranges);
	tb_key_items(b, MT_REC_KEY_STACKS, whole ? 3 : 2, MT_KS_FIELDS, stacks);
	tb_key_end(b, 1, 1);
	tb_round(b, 1, W, 1, 1);
}

struct replayed {
	struct mt_trace t;
	struct mt_replay *r;
	const struct mt_instance *in;
	struct mt_stack_stats stacks[8];
	uint32_t nstacks;
	uint64_t live_addr_sum, live_blocks;
};

static int on_stack(void *ctx, const struct mt_stack_stats *s)
{
	struct replayed *x = ctx;

	if (x->nstacks < 8)
		x->stacks[x->nstacks++] = *s;
	return 0;
}

static int on_live(void *ctx, const struct mt_block *b)
{
	struct replayed *x = ctx;

	x->live_addr_sum += b->addr ^ b->size ^ b->stack;
	x->live_blocks++;
	return 0;
}

static int on_done(void *ctx, struct mt_replay *r, const struct mt_instance *in)
{
	struct replayed *x = ctx;

	x->in = in;
	mt_replay_foreach_stack(r, in, on_stack, x);
	return mt_replay_foreach_live(r, in, on_live, x);
}

static void run(struct replayed *x, struct tb *b)
{
	static const struct mt_replay_callbacks cb = {.instance_done = on_done};
	struct mt_error err = {0};

	memset(x, 0, sizeof(*x));
	CHECK_EQ(mt_reader_open_memory(&x->t, b->buf, b->size, &err), 0);
	CHECK_EQ(mt_replay_open(&x->r, &x->t, &err), 0);
	CHECK_EQ(mt_replay_run(x->r, &cb, x, &err), 0);
	if (err.message[0])
		fprintf(stderr, "replay error at %" PRIu64 ": %s\n", err.offset, err.message);
}

static void finish(struct replayed *x)
{
	mt_replay_free(x->r);
	mt_reader_close(&x->t);
}

static const struct mt_stack_stats *stack_of(const struct replayed *x, uint32_t kind,
                                             uint32_t stack)
{
	for (uint32_t i = 0; i < x->nstacks; i++)
		if (x->stacks[i].kind == kind && x->stacks[i].stack == stack)
			return &x->stacks[i];
	return NULL;
}

static void same(const struct replayed *full, const struct replayed *ring)
{
	for (unsigned k = MT_KIND_HOST; k <= MT_KIND_MMAP; k++) {
		const struct mt_kind_stats *a = &full->in->kind[k], *b = &ring->in->kind[k];
		CHECK_EQ(b->allocations, a->allocations);
		CHECK_EQ(b->frees, a->frees);
		CHECK_EQ(b->bytes_allocated, a->bytes_allocated);
		CHECK_EQ(b->live_bytes, a->live_bytes);
		CHECK_EQ(b->live_blocks, a->live_blocks);
		CHECK_EQ(b->peak_bytes, a->peak_bytes);
		CHECK_EQ(b->peak_blocks, a->peak_blocks);
		CHECK_EQ(b->peak_time, a->peak_time);
		CHECK_EQ(b->unknown_frees, a->unknown_frees);
	}
	CHECK_EQ(ring->nstacks, full->nstacks);
	for (uint32_t i = 0; i < full->nstacks; i++) {
		const struct mt_stack_stats *a = &full->stacks[i],
		                            *b = stack_of(ring, a->kind, a->stack);
		CHECK(b != NULL);
		if (!b)
			continue;
		CHECK_EQ(b->allocations, a->allocations);
		CHECK_EQ(b->bytes_allocated, a->bytes_allocated);
		CHECK_EQ(b->live_bytes, a->live_bytes);
		CHECK_EQ(b->live_blocks, a->live_blocks);
		CHECK_EQ(b->peak_bytes, a->peak_bytes);
		CHECK_EQ(b->peak_blocks, a->peak_blocks);
	}
	CHECK_EQ(ring->live_blocks, full->live_blocks);
	CHECK_EQ(ring->live_addr_sum, full->live_addr_sum);
	CHECK_EQ(ring->in->end, full->in->end);
	CHECK_EQ(ring->in->stack_count, 2);
}

static void test_from_keyframe(void)
{
	struct replayed full, ring;
	struct tb fb, rb;
	size_t at;

	tb_init(&fb, CHUNK);
	first_chunk(&fb);
	later_chunks(&fb, &at);
	run(&full, &fb);
	/* the figures the ring must give, known by hand */
	CHECK_EQ(full.in->kind[MT_KIND_HOST].peak_bytes, 1538);
	CHECK_EQ(full.in->kind[MT_KIND_HOST].peak_time, 1120);
	CHECK_EQ(full.in->kind[MT_KIND_HOST].allocations, 9);
	CHECK_EQ(full.in->kind[MT_KIND_HOST].live_bytes, 1488);
	CHECK_EQ(stack_of(&full, MT_KIND_HOST, 1)->peak_bytes, 138);
	CHECK_EQ(full.in->window_start, 0);
	CHECK_EQ(full.in->nsamples, 2);

	/* the ring: seq 0 was given back; its place holds round 1's chunks */
	tb_init(&rb, CHUNK);
	((struct mt_file_header *)rb.buf)->ring_size = 16 * CHUNK;
	rb.seq = 1;
	later_chunks(&rb, &at);
	consumer_chunks(&rb, at, true);
	run(&ring, &rb);
	CHECK_EQ(ring.in->window_start, W);
	CHECK(mt_replay_keyframes(ring.r)->ring);
	CHECK_EQ(mt_replay_keyframes(ring.r)->usable, 1);
	CHECK_EQ(ring.in->nsamples, 1); /* the window's: the one before the resume point is held */
	same(&full, &ring);
	finish(&ring);
	tb_free_buf(&rb);

	/* the consumer died writing its keyframe: no round, every record that is left */
	tb_init(&rb, CHUNK);
	((struct mt_file_header *)rb.buf)->ring_size = 16 * CHUNK;
	first_chunk(&rb);
	later_chunks(&rb, &at);
	consumer_chunks(&rb, at, false);
	run(&ring, &rb);
	CHECK_EQ(ring.in->window_start, 0);
	same(&full, &ring);
	finish(&ring);
	tb_free_buf(&rb);

	finish(&full);
	tb_free_buf(&fb);
}

int main(void)
{
	test_from_keyframe();
	if (test_failures)
		fprintf(stderr, "%d checks failed\n", test_failures);
	return test_failures ? 1 : 0;
}
