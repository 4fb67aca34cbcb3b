/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of analyzer/reader.c: every record type decodes to exact
 * values; a cut, corrupt or foreign file is an error with the right offset
 * or a clean stop, never a crash (these tests run under ASan and UBSan);
 * what a killed writer leaves (zero type byte, chunk magic 0) reads cleanly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <memtrace/bytes.h>
#include <memtrace/crc32c.h>

#include "reader.h"
#include "replay.h"
#include "test-common.h"
#include "trace-builder.h"

#define CHUNK 4096u
#define FIRST (MT_HEADER_SIZE + sizeof(struct mt_chunk_header)) /* first record of chunk 0 */

/* Reads every record of every chunk; returns the first error or 0, and counts records. */
static int walk(const struct mt_trace *t, uint64_t *records, struct mt_error *err)
{
	static struct mt_record rec;
	uint64_t slots = mt_reader_chunk_slots(t);

	*records = 0;
	for (uint64_t i = 0; i < slots; i++) {
		struct mt_cursor c;
		int r = mt_cursor_init(&c, t, i, err);
		if (r < 0)
			return r;
		while ((r = mt_cursor_next(&c, &rec, err)) > 0)
			(*records)++;
		if (r < 0)
			return r;
	}
	return 0;
}

/* Opens, walks and replays bytes copied to their own allocation, so ASan sees any overread. */
static int read_all(const uint8_t *data, size_t size, uint64_t *records, struct mt_error *err)
{
	uint8_t *copy = malloc(size ? size : 1);
	struct mt_replay *rp = NULL;
	struct mt_trace t;
	int r;

	memcpy(copy, data, size);
	r = mt_reader_open_memory(&t, copy, size, err);
	if (r == 0)
		r = walk(&t, records, err);
	if (r == 0) {
		r = mt_replay_open(&rp, &t, err);
		if (r == 0)
			r = mt_replay_run(rp, NULL, NULL, err);
		mt_replay_free(rp);
	}
	mt_reader_close(&t);
	free(copy);
	return r;
}

static const uint64_t frames[] = {0x401234, 0x401000, 0x7f0000001000, 0x400fff};
static const uint64_t py[] = {9 << 1, 0 << 1 | MT_PYFRAME_ENTRY};
static const uint64_t py_lasti[] = {300, 0};
/* a REACH_BLOCKS record's addresses: up, down (a negative delta), and far up */
static const uint64_t reached[] = {0x55550100, 0x55540000, 0x7ffff7a00010};

/* a keyframe: its counts (threads, blocks, ranges, stacks), two kinds' totals and its parts */
static const uint64_t key_counts[4] = {2, 2, 1, 1};
static const uint64_t key_kinds[2 * TB_KIND_VALUES] = {
        MT_KIND_HOST,
        10,
        8,
        1000,
        600,
        5,
        5000050,
        1,
        2,
        0,
        0,
        MT_KIND_CUDA_DEVICE + 1,
        3,
        1,
        3 << 20,
        2 << 20,
        2,
        5000060,
        0,
        0,
        64,
        1,
};
static const uint64_t key_threads[2 * MT_KT_FIELDS] = {101, 7, 48, 0, 102, 9, 300, 1};
static const uint64_t key_blocks[2 * MT_KB_FIELDS] = {
        0x55550100, 40, 3, 1, MT_KIND_HOST, 1, 0x55540000, 1 << 20, 4, 1, MT_KIND_CUDA_DEVICE + 1,
        1};
static const uint64_t key_ranges[MT_KR_FIELDS] = {0x7f1000000000, 8192, 5, 1};
static const uint64_t key_stacks[MT_KS_FIELDS] = {MT_KIND_HOST, 1, 3, 10, 1000, 600, 5};

/* Checks a KEY_* parts record's items against want (n items of fields values). */
static void check_key_items(const struct mt_record *rec, uint32_t n, const uint64_t *want)
{
	const uint8_t *pos = rec->u.key_items.items;
	uint64_t v[MT_KEY_FIELDS_MAX] = {0};

	CHECK_EQ(rec->u.key_items.n, n);
	for (uint32_t i = 0; i < n; i++) {
		CHECK(mt_key_next(rec, &pos, v));
		for (uint32_t f = 0; f < rec->u.key_items.fields; f++)
			CHECK_EQ(v[f], want[i * rec->u.key_items.fields + f]);
	}
	CHECK(!mt_key_next(rec, &pos, v));
}

/* One record of each type in one chunk; returns their offsets in off[type]. */
static void build_all(struct tb *b, size_t off[MT_REC_TYPE_COUNT + 1])
{
	static const char cmd[] = "prog\0-x\0arg two";

	tb_init(b, CHUNK);
	tb_chunk(b, 1, 100, 101, 5000000);
	off[MT_REC_PROCESS] =
	        tb_process(b, 5000010, 100, 99, MT_ORIGIN_ROOT, 0, "/bin/prog", cmd, sizeof(cmd));
	tb_dt(b, 5000020);
	tb_u(b, 0x7f0000000000);
	tb_str(b, "/lib/libc.so.6", 14);
	tb_str(b, "\x01\x02\xab", 3);
	tb_u(b, 2);
	tb_u(b, 0);
	tb_u(b, 0x1000);
	tb_u(b, 4);
	tb_u(b, 0x1000);
	tb_u(b, 0x2345);
	tb_u(b, 5);
	off[MT_REC_MODULE] = tb_end(b, MT_REC_MODULE);
	tb_dt(b, 5000030);
	tb_u(b, 0x7f0000000000);
	tb_u(b, 1);
	off[MT_REC_MODULE_GONE] = tb_end(b, MT_REC_MODULE_GONE);
	off[MT_REC_STACK] = tb_stack(b, 7, 4, frames);
	off[MT_REC_ALLOC] = tb_alloc(b, 5000040, MT_FN_CALLOC, 0x55550000, 48, 7);
	off[MT_REC_FREE] = tb_free(b, 5000050, 0x55550000);
	off[MT_REC_REALLOC] = tb_realloc(b, 5000070, 5000060, 0x55550100, 0x55540000, 1 << 20, 7);
	off[MT_REC_FAIL] = tb_fail(b, 5000080, MT_FN_MALLOC, UINT64_MAX, 7, ENOMEM);
	off[MT_REC_MMAP] = tb_mmap(b, 5000090, 0x7f1000000000, 3 * 4096, 7);
	off[MT_REC_MUNMAP] = tb_munmap(b, 5000100, 0x7f1000001000, 4096);
	off[MT_REC_MREMAP] =
	        tb_mremap(b, 5000120, 5000110, 0x7f1000000000, 4096, 0x7f2000000000, 8192, 7);
	tb_dt(b, 5000130);
	tb_u(b, 5000130);
	tb_u(b, MT_SAMPLE_FIELD_COUNT + 2); /* two values more than this reader knows */
	for (unsigned i = 0; i < MT_SAMPLE_FIELD_COUNT + 2; i++)
		tb_u(b, 1000 * (i + 1));
	off[MT_REC_SAMPLE] = tb_end(b, MT_REC_SAMPLE);
	off[MT_REC_EXIT] = tb_exit(b, 5000140, MT_EXIT_EXIT, 3);
	tb_u(b, MT_LOST_STACK_TABLE_FULL);
	tb_u(b, 17);
	off[MT_REC_LOST] = tb_end(b, MT_REC_LOST);
	tb_dt(b, 5000150);
	tb_str(b, "epoch 3", 7);
	off[MT_REC_MARK] = tb_end(b, MT_REC_MARK);
	off[MT_REC_EXEC] = tb_exec(b, 5000160, "/bin/static prog");
	off[MT_REC_PYCODE] =
	        tb_pycode(b, 9, 0x30b, 12, "/lib/a.py", "Outer.run", "\x80\x00\xd8", 3);
	off[MT_REC_PYSTACK] = tb_pystack(b, 5, 2, py, py_lasti);
	off[MT_REC_REACH] = tb_reach(b, 5000170, MT_REACH_DONE, 0, 3, 1200, 1 << 20, 450000);
	off[MT_REC_REACH_BLOCKS] = tb_reach_blocks(b, MT_REACH_INDIRECT, 3, reached);
	off[MT_REC_SHORT_MALLOC] = tb_short_malloc(b, 5000180, 0x55560000, 24, 7);
	off[MT_REC_SHORT_MALLOC_SAME] = tb_short_malloc(b, 5000190, 0x55560040, 300, 7);
	off[MT_REC_SHORT_FREE] = tb_short_free(b, 5000200, 0x55560000);
	off[MT_REC_KEYFRAME] = tb_keyframe(b, 4, 1, 5000100, 123, key_counts, 2, key_kinds);
	off[MT_REC_KEY_THREADS] = tb_key_items(b, MT_REC_KEY_THREADS, 2, MT_KT_FIELDS, key_threads);
	off[MT_REC_KEY_BLOCKS] = tb_key_items(b, MT_REC_KEY_BLOCKS, 2, MT_KB_FIELDS, key_blocks);
	off[MT_REC_KEY_RANGES] = tb_key_items(b, MT_REC_KEY_RANGES, 1, MT_KR_FIELDS, key_ranges);
	off[MT_REC_KEY_STACKS] = tb_key_items(b, MT_REC_KEY_STACKS, 1, MT_KS_FIELDS, key_stacks);
	off[MT_REC_KEY_END] = tb_key_end(b, 1, 4);
	off[MT_REC_ROUND] = tb_round(b, 4, 5000100, 3, 1);
	off[MT_REC_COPY] = tb_copy(b, 2, 77);
}

/* The type a reader gives a record written as type: a short one reads as ALLOC or FREE. */
static unsigned read_as(unsigned type)
{
	if (!mt_record_is_short(type))
		return type;
	return type == MT_REC_SHORT_FREE ? MT_REC_FREE : MT_REC_ALLOC;
}

static void test_every_type(void)
{
	size_t off[MT_REC_TYPE_COUNT + 1];
	static struct mt_record rec;
	struct mt_error err = {0};
	struct mt_cursor c;
	struct mt_trace t;
	struct tb b;
	unsigned type;

	build_all(&b, off);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(t.chunk_count, 1);
	CHECK(!t.truncated);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(c.chunk.instance, 1);
	CHECK_EQ(c.chunk.pid, 100);
	CHECK_EQ(c.chunk.tid, 101);
	CHECK_EQ(c.chunk.base_ticks, 5000000);
	for (type = 1; type < MT_REC_TYPE_COUNT; type++) {
		CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
		CHECK_EQ(rec.type, read_as(type));
		CHECK_EQ(rec.offset, off[type]);
		switch (type) {
		case MT_REC_PROCESS:
			CHECK_EQ(rec.time, 5000010);
			CHECK_EQ(rec.u.process.pid, 100);
			CHECK_EQ(rec.u.process.ppid, 99);
			CHECK_EQ(rec.u.process.origin, 0);
			CHECK_EQ(rec.u.process.realtime, 1700000000000000000ull);
			CHECK_EQ(rec.u.process.depth, 64);
			CHECK_EQ(rec.u.process.exe.len, 9);
			CHECK(!memcmp(rec.u.process.exe.data, "/bin/prog", 9));
			CHECK_EQ(rec.u.process.cmdline.len, 16);
			break;
		case MT_REC_MODULE:
			CHECK_EQ(rec.time, 5000020);
			CHECK_EQ(rec.u.module.base, 0x7f0000000000);
			CHECK_EQ(rec.u.module.path.len, 14);
			CHECK_EQ(rec.u.module.build_id.len, 3);
			CHECK_EQ(rec.u.module.build_id.data[2], 0xab);
			CHECK_EQ(rec.u.module.nseg, 2);
			CHECK_EQ(rec.u.module.seg[0].memsz, 0x1000);
			CHECK_EQ(rec.u.module.seg[0].flags, 4);
			CHECK_EQ(rec.u.module.seg[1].vaddr, 0x1000);
			CHECK_EQ(rec.u.module.seg[1].memsz, 0x2345);
			CHECK_EQ(rec.u.module.seg[1].flags, 5);
			break;
		case MT_REC_MODULE_GONE:
			CHECK_EQ(rec.u.module_gone.base, 0x7f0000000000);
			CHECK_EQ(rec.u.module_gone.gen, 1);
			break;
		case MT_REC_STACK:
			CHECK_EQ(rec.u.stack.id, 7);
			CHECK_EQ(rec.u.stack.n, 4);
			for (int i = 0; i < 4; i++)
				CHECK_EQ(rec.u.stack.frames[i], frames[i]);
			CHECK_EQ(rec.u.stack.pystack,
			         0); /* a record that ends after its native frames */
			break;
		case MT_REC_ALLOC:
			CHECK_EQ(rec.time, 5000040);
			CHECK_EQ(rec.u.alloc.fn, MT_FN_CALLOC);
			CHECK_EQ(rec.u.alloc.addr, 0x55550000);
			CHECK_EQ(rec.u.alloc.size, 48);
			CHECK_EQ(rec.u.alloc.stack, 7);
			break;
		case MT_REC_FREE:
			CHECK_EQ(rec.time, 5000050);
			CHECK_EQ(rec.u.free.fn, MT_FN_FREE);
			CHECK_EQ(rec.u.free.addr, 0x55550000);
			break;
		case MT_REC_REALLOC:
			CHECK_EQ(rec.time, 5000070);
			CHECK_EQ(rec.u.realloc.t0, 5000060);
			CHECK_EQ(rec.u.realloc.old, 0x55550100);
			CHECK_EQ(rec.u.realloc.addr, 0x55540000);
			CHECK_EQ(rec.u.realloc.size, 1 << 20);
			break;
		case MT_REC_FAIL:
			CHECK_EQ(rec.u.fail.fn, MT_FN_MALLOC);
			CHECK_EQ(rec.u.fail.size, UINT64_MAX);
			CHECK_EQ(rec.u.fail.err, ENOMEM);
			break;
		case MT_REC_MMAP:
			CHECK_EQ(rec.u.mmap.addr, 0x7f1000000000);
			CHECK_EQ(rec.u.mmap.len, 3 * 4096);
			CHECK_EQ(rec.u.mmap.prot, 3);
			CHECK_EQ(rec.u.mmap.flags, 0x22);
			break;
		case MT_REC_MUNMAP:
			CHECK_EQ(rec.u.munmap.addr, 0x7f1000001000);
			CHECK_EQ(rec.u.munmap.len, 4096);
			break;
		case MT_REC_MREMAP:
			CHECK_EQ(rec.time, 5000120);
			CHECK_EQ(rec.u.mremap.t0, 5000110);
			CHECK_EQ(rec.u.mremap.old, 0x7f1000000000);
			CHECK_EQ(rec.u.mremap.old_len, 4096);
			CHECK_EQ(rec.u.mremap.addr, 0x7f2000000000);
			CHECK_EQ(rec.u.mremap.len, 8192);
			break;
		case MT_REC_SAMPLE:
			CHECK_EQ(rec.u.sample.ns, 5000130);
			CHECK_EQ(rec.u.sample.n, MT_SAMPLE_FIELD_COUNT + 2);
			CHECK_EQ(rec.u.sample.values[0], 1000);
			CHECK_EQ(rec.u.sample.values[MT_SAMPLE_FIELD_COUNT - 1],
			         1000 * MT_SAMPLE_FIELD_COUNT);
			break;
		case MT_REC_EXIT:
			CHECK_EQ(rec.u.exit.how, MT_EXIT_EXIT);
			CHECK_EQ(rec.u.exit.status, 3);
			break;
		case MT_REC_LOST:
			CHECK_EQ(rec.u.lost.reason, 1);
			CHECK_EQ(rec.u.lost.count, 17);
			CHECK_EQ(rec.time, 5000140);
			break;
		case MT_REC_MARK:
			CHECK_EQ(rec.u.mark.label.len, 7);
			CHECK(!memcmp(rec.u.mark.label.data, "epoch 3", 7));
			CHECK_EQ(rec.time, 5000150);
			break;
		case MT_REC_PYCODE:
			CHECK_EQ(rec.u.pycode.id, 9);
			CHECK_EQ(rec.u.pycode.version, 0x30b);
			CHECK_EQ(rec.u.pycode.first_line, 12);
			CHECK_EQ(rec.u.pycode.file.len, 9);
			CHECK(!memcmp(rec.u.pycode.file.data, "/lib/a.py", 9));
			CHECK_EQ(rec.u.pycode.name.len, 9);
			CHECK(!memcmp(rec.u.pycode.name.data, "Outer.run", 9));
			CHECK_EQ(rec.u.pycode.linetable.len, 3);
			CHECK(!memcmp(rec.u.pycode.linetable.data, "\x80\x00\xd8", 3));
			CHECK_EQ(rec.u.pycode.linetable_size, 3);
			break;
		case MT_REC_PYSTACK:
			CHECK_EQ(rec.u.pystack.id, 5);
			CHECK_EQ(rec.u.pystack.n, 2);
			CHECK_EQ(rec.u.pystack.frames[0].code, 9);
			CHECK(!rec.u.pystack.frames[0].entry);
			CHECK_EQ(rec.u.pystack.frames[0].lasti, 300);
			CHECK_EQ(rec.u.pystack.frames[1].code, 0);
			CHECK(rec.u.pystack.frames[1].entry);
			CHECK_EQ(rec.u.pystack.frames[1].lasti, 0);
			break;
		case MT_REC_EXEC:
			CHECK_EQ(rec.u.exec.path.len, 16);
			CHECK(!memcmp(rec.u.exec.path.data, "/bin/static prog", 16));
			CHECK_EQ(rec.time, 5000160);
			break;
		case MT_REC_REACH:
			CHECK_EQ(rec.u.reach.time, 5000170);
			CHECK_EQ(rec.time, 5000160); /* a whole time: the register stays */
			CHECK_EQ(rec.u.reach.status, MT_REACH_DONE);
			CHECK_EQ(rec.u.reach.detail, 0);
			CHECK_EQ(rec.u.reach.blocks, 3);
			CHECK_EQ(rec.u.reach.bytes, 1200);
			CHECK_EQ(rec.u.reach.scanned, 1 << 20);
			CHECK_EQ(rec.u.reach.ns, 450000);
			break;
		case MT_REC_REACH_BLOCKS: {
			const uint8_t *pos = rec.u.reach_blocks.addrs;
			uint64_t addr = 0;
			CHECK_EQ(rec.u.reach_blocks.cls, MT_REACH_INDIRECT);
			CHECK_EQ(rec.u.reach_blocks.n, 3);
			for (int i = 0; i < 3; i++) {
				CHECK(mt_reach_blocks_next(&rec, &pos, &addr));
				CHECK_EQ(addr, reached[i]);
			}
			CHECK(!mt_reach_blocks_next(&rec, &pos, &addr));
			break;
		}
		case MT_REC_SHORT_MALLOC: /* dt, 0x7f2000000000 down to 0x55560000, size, 0 + 7 */
			CHECK_EQ(rec.length, 1 + 7 + 1 + 1);
			CHECK_EQ(rec.time, 5000180);
			CHECK_EQ(rec.u.alloc.fn, MT_FN_MALLOC);
			CHECK_EQ(rec.u.alloc.addr, 0x55560000);
			CHECK_EQ(rec.u.alloc.size, 24);
			CHECK_EQ(rec.u.alloc.stack, 7);
			CHECK_EQ(rec.u.alloc.kind, MT_KIND_HOST);
			break;
		case MT_REC_SHORT_MALLOC_SAME: /* no stack field: the register's */
			CHECK_EQ(rec.length, 1 + 2 + 2);
			CHECK_EQ(rec.time, 5000190);
			CHECK_EQ(rec.u.alloc.addr, 0x55560040);
			CHECK_EQ(rec.u.alloc.size, 300);
			CHECK_EQ(rec.u.alloc.stack, 7);
			break;
		case MT_REC_SHORT_FREE:
			CHECK_EQ(rec.length, 2);
			CHECK_EQ(rec.time, 5000200);
			CHECK_EQ(rec.u.free.fn, MT_FN_FREE);
			CHECK_EQ(rec.u.free.addr, 0x55560000);
			CHECK_EQ(rec.u.free.kind, MT_KIND_HOST);
			break;
		case MT_REC_KEYFRAME:
			CHECK_EQ(rec.u.keyframe.round, 4);
			CHECK_EQ(rec.u.keyframe.instance, 1);
			CHECK_EQ(rec.u.keyframe.time, 5000100);
			CHECK_EQ(rec.u.keyframe.events, 123);
			CHECK_EQ(rec.u.keyframe.nthreads, 2);
			CHECK_EQ(rec.u.keyframe.nstacks, 1);
			CHECK_EQ(rec.u.keyframe.nkinds, 2);
			CHECK_EQ(rec.u.keyframe.kinds[1].kind, MT_KIND_CUDA_DEVICE + 1);
			CHECK_EQ(rec.u.keyframe.kinds[1].bytes_allocated, 3 << 20);
			CHECK_EQ(rec.u.keyframe.kinds[1].inherited_blocks, 1);
			CHECK_EQ(rec.u.keyframe.kinds[0].peak_time, 5000050);
			CHECK_EQ(rec.u.keyframe.kinds[0].unknown_frees, 2);
			break;
		case MT_REC_KEY_THREADS:
			check_key_items(&rec, 2, key_threads);
			break;
		case MT_REC_KEY_BLOCKS:
			check_key_items(&rec, 2, key_blocks);
			break;
		case MT_REC_KEY_RANGES:
			check_key_items(&rec, 1, key_ranges);
			break;
		case MT_REC_KEY_STACKS:
			check_key_items(&rec, 1, key_stacks);
			break;
		case MT_REC_KEY_END:
			CHECK_EQ(rec.u.key_end.instance, 1);
			CHECK_EQ(rec.u.key_end.round, 4);
			break;
		case MT_REC_ROUND:
			CHECK_EQ(rec.u.round.round, 4);
			CHECK_EQ(rec.u.round.time, 5000100);
			CHECK_EQ(rec.u.round.usable, 3);
			CHECK_EQ(rec.u.round.instances, 1);
			break;
		case MT_REC_COPY:
			CHECK_EQ(rec.u.copy.instance, 2);
			CHECK_EQ(rec.u.copy.seq, 77);
			break;
		}
	}
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 0);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 0);
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/*
 * Every prefix of a trace: an error when cut inside the header, else a clean
 * read of every record whole before the cut (issue 11: a cut chunk is read
 * up to its last whole record), the count growing with the prefix.
 */
static void test_truncation(void)
{
	size_t off[MT_REC_TYPE_COUNT + 1];
	struct mt_error err;
	uint64_t records, before = 0;
	struct tb b;

	build_all(&b, off);
	tb_chunk(&b, 1, 100, 102, 6000000);
	tb_alloc(&b, 6000001, MT_FN_MALLOC, 0x1000, 10, 0);
	for (size_t n = 0; n <= b.size; n++) {
		int r;
		memset(&err, 0, sizeof(err));
		r = read_all(b.buf, n, &records, &err);
		if (n < MT_HEADER_SIZE) {
			CHECK(r == -EBADMSG);
			CHECK(err.message[0] != 0);
			continue;
		}
		CHECK_EQ(r, 0);
		CHECK(records >= before);
		before = records;
		if (n == MT_HEADER_SIZE + CHUNK) /* the first chunk whole, the second not begun */
			CHECK_EQ(records, MT_REC_TYPE_COUNT - 1);
	}
	CHECK_EQ(read_all(b.buf, b.size, &records, &err), 0);
	CHECK_EQ(records, MT_REC_TYPE_COUNT);
	tb_free_buf(&b);
}

/* A record cut at every byte inside its chunk: the zero bytes after it end the chunk cleanly or the
 * payload is short. */
static void test_cut_records(void)
{
	size_t off[MT_REC_TYPE_COUNT + 1];
	struct mt_error err;
	uint64_t records;
	struct tb b;

	build_all(&b, off);
	for (size_t n = FIRST; n < b.pos; n++) {
		uint8_t *copy = malloc(b.size);
		int r;
		memcpy(copy, b.buf, b.size);
		memset(copy + n, 0, b.pos - n);
		r = read_all(copy, b.size, &records, &err);
		CHECK(r == 0 || r == -EBADMSG);
		free(copy);
	}
	tb_free_buf(&b);
}

static void test_header_errors(void)
{
	struct mt_error err = {0};
	struct mt_file_header *h;
	struct mt_trace t;
	struct tb b;
	uint8_t elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};

	CHECK_EQ(mt_reader_open_memory(&t, "", 0, &err), -EBADMSG);
	CHECK_STR(err.message, "the file is empty, not a memtrace trace");
	CHECK_EQ(mt_reader_open_memory(&t, elf, sizeof(elf), &err), -EBADMSG);
	CHECK_EQ(err.offset, 0);
	CHECK_STR(err.message, "not a memtrace trace (no MEMTRACE magic)");

	tb_init(&b, CHUNK);
	h = (struct mt_file_header *)b.buf;
	h->version = 5;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), -EPROTONOSUPPORT);
	CHECK_STR(err.message, "trace format version 5 is newer than this memtrace reads (4)");
	CHECK_EQ(err.offset, 8);
	h->version = 1;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), -EPROTONOSUPPORT);
	CHECK_STR(err.message, "trace format version 1 is older than this memtrace reads (2); "
	                       "read it with the memtrace that wrote it");
	h->version = MT_FORMAT_VERSION;
	h->byte_order = __builtin_bswap32(MT_BYTE_ORDER_MARK);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), -EPROTONOSUPPORT);
	CHECK_EQ(err.offset, 20);
	h->byte_order = MT_BYTE_ORDER_MARK;
	h->chunk_unit = 1000;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), -EBADMSG);
	CHECK_EQ(err.offset, 16);
	h->chunk_unit = MT_CHUNK_UNIT;
	h->header_size = 8;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), -EBADMSG);
	CHECK_EQ(err.offset, 12);
	h->header_size = MT_HEADER_SIZE;
	b.buf[0] = 'X';
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), -EBADMSG);
	b.buf[0] = 'M';
	/* a header alone is an empty trace, and next_chunk past the end is fine */
	h->next_chunk = MT_HEADER_SIZE + 10 * CHUNK;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_reader_chunk_slots(&t), 0);
	tb_free_buf(&b);
}

static void test_zero_type_and_unused_chunks(void)
{
	static struct mt_record rec;
	struct mt_error err = {0};
	struct mt_replay *rp;
	struct mt_cursor c;
	struct mt_trace t;
	size_t at;
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_process(&b, 1001, 100, 1, 0, 0, "/p", "p", 1);
	tb_alloc(&b, 1002, MT_FN_MALLOC, 0x1000, 10, 0);
	at = b.pos;
	tb_alloc(&b, 1003, MT_FN_MALLOC, 0x2000, 20, 0);
	b.buf[at] = 0; /* a record whose type byte was never stored: the writer was killed */
	tb_chunk_magic(&b, 0, 0, 0, 0, 0); /* claimed, never written */
	b.buf[b.chunk + 100] = 0xee;       /* whatever is in it is not read */
	tb_chunk(&b, 1, 100, 100, 2000);
	tb_alloc(&b, 2001, MT_FN_MALLOC, 0x3000, 30, 0);

	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	/* the unwritten chunk is stepped over: two chunks, the second after it */
	CHECK_EQ(mt_reader_chunk_slots(&t), 2);
	CHECK_EQ(t.unused_chunks, 1);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.u.alloc.addr, 0x1000);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 1, &err), 1);
	CHECK_EQ(c.chunk.offset, MT_HEADER_SIZE + 2 * CHUNK);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.u.alloc.addr, 0x3000);
	CHECK_EQ(mt_replay_open(&rp, &t, &err), 0);
	CHECK_EQ(mt_replay_trace_stats(rp)->unused_chunks, 1);
	CHECK_EQ(mt_replay_trace_stats(rp)->chunks, 2);
	CHECK_EQ(mt_replay_run(rp, NULL, NULL, &err), 0);
	CHECK_EQ(mt_replay_instance(rp, 0)->kind[MT_KIND_HOST].live_bytes, 40);
	CHECK_EQ(mt_replay_instance(rp, 0)->kind[MT_KIND_HOST].live_blocks, 2);
	CHECK_EQ(mt_replay_instance(rp, 0)->end, MT_END_KILLED);
	mt_replay_free(rp);
	mt_reader_close(&t);

	/* garbage where a chunk magic belongs is an error at that chunk */
	b.buf[MT_HEADER_SIZE + CHUNK] = 0x42;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 1, &err), -EBADMSG);
	CHECK_EQ(err.offset, MT_HEADER_SIZE + CHUNK);
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/*
 * Versions 2 and 3 (40-byte chunk headers, no seq) still read, in file
 * order; 3 with its short records, the stack register begun again in each
 * chunk.
 */
static void test_old_version(uint32_t version)
{
	static struct mt_record rec;
	struct mt_error err = {0};
	struct mt_replay *rp;
	struct mt_cursor c;
	struct mt_trace t;
	struct tb b;

	tb_init(&b, CHUNK);
	tb_version(&b, version);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_process(&b, 1001, 100, 1, 0, 0, "/p", "p", 1);
	tb_alloc(&b, 1002, MT_FN_MALLOC, 0x1000, 10, 0);
	if (version == 3)
		tb_short_malloc(&b, 1003, 0x2000, 100, 5);
	tb_chunk(&b, 1, 100, 100, 2000);
	tb_alloc(&b, 2001, MT_FN_MALLOC, 0x3000, 30, 0);
	if (version == 3) {
		tb_short_malloc(&b, 2002, 0x4000, 7, 5);
		tb_short_free(&b, 2003, 0x2000);
	}
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(t.header.version, version);
	CHECK_EQ(t.chunk_header, MT_CHUNK_HEADER_V3);
	CHECK_EQ(t.header.ring_size, 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 1, &err), 1);
	CHECK_EQ(c.chunk.seq, 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.offset, MT_HEADER_SIZE + CHUNK + MT_CHUNK_HEADER_V3);
	CHECK_EQ(rec.u.alloc.addr, 0x3000);
	if (version == 3) {
		CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
		CHECK_EQ(rec.type, MT_REC_ALLOC);
		CHECK_EQ(rec.u.alloc.fn, MT_FN_MALLOC);
		CHECK_EQ(rec.u.alloc.addr, 0x4000);
		CHECK_EQ(rec.u.alloc.size, 7);
		CHECK_EQ(rec.u.alloc.stack, 5);
		CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
		CHECK_EQ(rec.type, MT_REC_FREE);
		CHECK_EQ(rec.u.free.addr, 0x2000);
	}
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 0);
	CHECK_EQ(mt_replay_open(&rp, &t, &err), 0);
	CHECK_EQ(mt_replay_run(rp, NULL, NULL, &err), 0);
	CHECK_EQ(mt_replay_instance(rp, 0)->kind[MT_KIND_HOST].live_bytes, version == 3 ? 47 : 40);
	mt_replay_free(rp);
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/*
 * A ring puts a thread's next chunk wherever an extent was given back:
 * its chunks are read in the order of their seq, not of the file.
 */
static void test_seq_order(void)
{
	struct mt_error err = {0};
	struct mt_replay *rp;
	struct mt_trace t;
	struct tb b;

	tb_init(&b, CHUNK);
	((struct mt_file_header *)b.buf)->ring_size = 4 * CHUNK;
	b.seq = 7; /* the thread's second chunk, first in the file */
	tb_chunk(&b, 1, 100, 100, 2000);
	tb_free(&b, 2001, 0x1000);
	tb_realloc(&b, 2003, 2002, 0x3000, 0x4000, 50, 0);
	b.seq = 3;
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_process(&b, 1001, 100, 1, 0, 0, "/p", "p", 1);
	tb_alloc(&b, 1002, MT_FN_MALLOC, 0x1000, 10, 0);
	tb_alloc(&b, 1003, MT_FN_MALLOC, 0x3000, 30, 0);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_reader_slot_by_seq(&t, 0), 1);
	CHECK_EQ(mt_reader_slot_by_seq(&t, 1), 0);
	CHECK_EQ(mt_replay_open(&rp, &t, &err), 0);
	CHECK_EQ(mt_replay_run(rp, NULL, NULL, &err), 0);
	/* in file order the free and the realloc would find nothing live */
	CHECK_EQ(mt_replay_instance(rp, 0)->kind[MT_KIND_HOST].live_bytes, 50);
	CHECK_EQ(mt_replay_instance(rp, 0)->kind[MT_KIND_HOST].unknown_frees, 0);
	mt_replay_free(rp);
	mt_reader_close(&t);
	tb_free_buf(&b);
}

static void test_corrupt_records(void)
{
	static struct mt_record rec;
	struct mt_error err = {0};
	struct mt_cursor c;
	struct mt_trace t;
	size_t at;
	struct tb b;

	/* unknown type skipped by its length; extra payload ignored */
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_u(&b, 1);
	tb_u(&b, 2);
	tb_u(&b, 3);
	tb_end(&b, 99);
	tb_dt(&b, 1010);
	tb_u(&b, MT_FN_FREE);
	tb_addr(&b, 0x5000);
	tb_u(&b, MT_KIND_HOST); /* the kind: an appended field this reader knows */
	tb_u(&b, 12345);        /* a field from the future */
	tb_str(&b, "more", 4);
	tb_end(&b, MT_REC_FREE);
	tb_exit(&b, 1020, 1, 0);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.type, 99);
	CHECK_EQ(rec.length, 3);
	CHECK(mt_record_name(rec.type) == NULL);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.type, MT_REC_FREE);
	CHECK_EQ(rec.u.free.addr, 0x5000);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.type, MT_REC_EXIT);
	CHECK_EQ(rec.time, 1020);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 0);
	mt_reader_close(&t);
	tb_free_buf(&b);

	/* missing fields: an ALLOC without its stack */
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_dt(&b, 1001);
	tb_u(&b, MT_FN_MALLOC);
	tb_addr(&b, 0x1000);
	tb_u(&b, 10);
	at = tb_end(&b, MT_REC_ALLOC);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 0); /* and it stays stopped */
	mt_reader_close(&t);
	tb_free_buf(&b);

	/* a corrupt varint in the length, and one inside the payload */
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = b.pos;
	b.buf[at] = MT_REC_ALLOC;
	memset(b.buf + at + 1, 0xff, 12);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	mt_reader_close(&t);
	b.buf[at + 1] = 12;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	mt_reader_close(&t);

	/* a length past the end of the chunk */
	b.buf[at + 1] = 0x80 | 0x7f;
	b.buf[at + 2] = 0x7f;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK(strstr(err.message, "past the end of its chunk") != NULL);
	mt_reader_close(&t);

	/* absurd counts: a STACK of 100000 frames, a MODULE of 1000 segments */
	memset(b.buf + at, 0, 64);
	b.pos = at;
	tb_u(&b, 1);
	tb_u(&b, 0);
	tb_u(&b, 100000);
	tb_end(&b, MT_REC_STACK);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	mt_reader_close(&t);
	tb_free_buf(&b);

	/* a record that ends exactly at the chunk's end, and a padded length */
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = b.pos;
	b.buf[at] = 99;
	b.buf[at + 1] = 0x80 | ((CHUNK - sizeof(struct mt_chunk_header) - 4) & 0x7f);
	b.buf[at + 2] = 0x80 | (((CHUNK - sizeof(struct mt_chunk_header) - 4) >> 7) & 0x7f);
	b.buf[at + 3] = 0;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.length, CHUNK - sizeof(struct mt_chunk_header) - 4);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 0);
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/* Reads the one record of a chunk; returns mt_cursor_next's result. */
static int read_one(struct tb *b, struct mt_record *rec, struct mt_error *err)
{
	struct mt_cursor c;
	struct mt_trace t;
	int r;

	CHECK_EQ(mt_reader_open_memory(&t, b->buf, b->size, err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, err), 1);
	r = mt_cursor_next(&c, rec, err);
	mt_reader_close(&t);
	tb_free_buf(b);
	return r;
}

/*
 * A STACK record's trailing PYSTACK id, and PYSTACK records: frames decoded
 * with their entry flags; 1 to 128 of them; none, more, a cut frame, id 0,
 * or a PYCODE record that breaks its own limits, is an error at the
 * record's offset.
 */
static void test_python_frames(void)
{
	static const uint64_t code[] = {5 << 1, 4 << 1 | MT_PYFRAME_ENTRY,
	                                0 << 1 | MT_PYFRAME_ENTRY};
	static const uint64_t lasti[] = {13, 0, 1u << 20};
	static uint64_t many[MT_MAX_PYFRAMES + 1], many_lasti[MT_MAX_PYFRAMES + 1];
	static struct mt_record rec;
	struct mt_error err = {0};
	char name[MT_PYCODE_MAX_NAME + 2];
	static uint8_t table[MT_PYCODE_MAX_LINETABLE + 1];
	size_t at;
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_stack_py(&b, 3, 2, frames, 1ull << 40);
	CHECK_EQ(read_one(&b, &rec, &err), 1);
	CHECK_EQ(rec.u.stack.n, 2);
	CHECK_EQ(rec.u.stack.frames[1], frames[1]);
	CHECK_EQ(rec.u.stack.pystack, 1ull << 40);

	/* an id of 0 written out: none */
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_stack_py(&b, 3, 2, frames, 0);
	CHECK_EQ(read_one(&b, &rec, &err), 1);
	CHECK_EQ(rec.u.stack.pystack, 0);

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = tb_pystack(&b, 1ull << 40, 3, code, lasti);
	CHECK_EQ(read_one(&b, &rec, &err), 1);
	CHECK_EQ(rec.offset, at);
	CHECK_EQ(rec.type, MT_REC_PYSTACK);
	CHECK_STR(mt_record_name(rec.type), "PYSTACK");
	CHECK_EQ(rec.u.pystack.id, 1ull << 40);
	CHECK_EQ(rec.u.pystack.n, 3);
	CHECK_EQ(rec.u.pystack.frames[0].code, 5);
	CHECK(!rec.u.pystack.frames[0].entry);
	CHECK_EQ(rec.u.pystack.frames[0].lasti, 13);
	CHECK_EQ(rec.u.pystack.frames[1].code, 4);
	CHECK(rec.u.pystack.frames[1].entry);
	CHECK_EQ(rec.u.pystack.frames[1].lasti, 0);
	CHECK_EQ(rec.u.pystack.frames[2].code, 0);
	CHECK(rec.u.pystack.frames[2].entry);
	CHECK_EQ(rec.u.pystack.frames[2].lasti, 1u << 20);

	for (unsigned i = 0; i <= MT_MAX_PYFRAMES; i++) {
		many[i] = (uint64_t)(i + 1) << 1;
		many_lasti[i] = i;
	}
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_pystack(&b, 2, MT_MAX_PYFRAMES, many, many_lasti);
	CHECK_EQ(read_one(&b, &rec, &err), 1);
	CHECK_EQ(rec.u.pystack.n, MT_MAX_PYFRAMES);
	CHECK_EQ(rec.u.pystack.frames[MT_MAX_PYFRAMES - 1].code, MT_MAX_PYFRAMES);
	CHECK_EQ(rec.u.pystack.frames[MT_MAX_PYFRAMES - 1].lasti, MT_MAX_PYFRAMES - 1);

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = tb_pystack(&b, 2, MT_MAX_PYFRAMES + 1, many, many_lasti);
	CHECK_EQ(read_one(&b, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK_STR(err.message, "PYSTACK record with 129 Python frames (1 to 128)");

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = tb_pystack(&b, 2, 0, many, many_lasti);
	CHECK_EQ(read_one(&b, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK_STR(err.message, "PYSTACK record with 0 Python frames (1 to 128)");

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = tb_pystack(&b, 0, 3, code, lasti);
	CHECK_EQ(read_one(&b, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK_STR(err.message, "PYSTACK record with id 0");

	/* a frame without its lasti */
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_u(&b, 3);
	tb_u(&b, 2);
	tb_u(&b, 5 << 1);
	tb_u(&b, 7);
	tb_u(&b, 6 << 1);
	at = tb_end(&b, MT_REC_PYSTACK);
	CHECK_EQ(read_one(&b, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK(strstr(err.message, "PYSTACK record: field 6 is cut off") != NULL);

	/* a PYSTACK id that is not a valid varint */
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_u(&b, 3);
	tb_u(&b, 0);
	tb_u(&b, 1);
	tb_u(&b, 0x401000);
	b.payload[b.plen++] = 0x80; /* a varint that goes on past the record */
	at = tb_end(&b, MT_REC_STACK);
	CHECK_EQ(read_one(&b, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK(strstr(err.message, "STACK record: field 5 is cut off") != NULL);

	/* PYCODE: id 0, a name or line table over its limit, a table longer than its whole */
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = tb_pycode(&b, 0, 0x30a, 1, "a.py", "f", "", 0);
	CHECK_EQ(read_one(&b, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK_STR(err.message, "PYCODE record with id 0");

	memset(name, 'n', sizeof(name));
	name[MT_PYCODE_MAX_NAME] = 0;
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_pycode(&b, 1, 0x30a, 1, name, name, "", 0);
	CHECK_EQ(read_one(&b, &rec, &err), 1);
	CHECK_EQ(rec.u.pycode.name.len, MT_PYCODE_MAX_NAME);
	name[MT_PYCODE_MAX_NAME] = 'n';
	name[MT_PYCODE_MAX_NAME + 1] = 0;
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = tb_pycode(&b, 1, 0x30a, 1, "a.py", name, "", 0);
	CHECK_EQ(read_one(&b, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);

	tb_init(&b, 4 * CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = tb_pycode(&b, 1, 0x30a, 1, "a.py", "f", table, sizeof(table));
	CHECK_EQ(read_one(&b, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_u(&b, 1);
	tb_u(&b, 0x30c);
	tb_u(&b, 1);
	tb_str(&b, "a.py", 4);
	tb_str(&b, "f", 1);
	tb_str(&b, "abc", 3);
	tb_u(&b, 2);
	at = tb_end(&b, MT_REC_PYCODE);
	CHECK_EQ(read_one(&b, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK_STR(err.message, "PYCODE record whose line table of 2 bytes holds 3");
}

/* Random damage to a valid trace: any outcome but a crash, a hang or a sanitizer report. */
static void test_random_damage(void)
{
	size_t off[MT_REC_TYPE_COUNT + 1];
	struct mt_error err;
	uint64_t records, seed = 42;
	struct tb b;

	build_all(&b, off);
	tb_chunk(&b, 2, 200, 200, 7000000);
	tb_process(&b, 7000001, 200, 100, MT_ORIGIN_FORK, 1, "/bin/prog", "prog", 4);
	tb_realloc(&b, 7000010, 7000005, 0x55540000, 0x66660000, 10, 7);
	tb_mmap(&b, 7000020, 0x7f3000000000, 8192, 0);
	tb_munmap(&b, 7000030, 0x7f3000001000, 1);
	for (int iter = 0; iter < 3000; iter++) {
		uint8_t *copy = malloc(b.size);
		int flips = 1 + iter % 8;
		memcpy(copy, b.buf, b.size);
		for (int f = 0; f < flips; f++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			size_t pos = MT_HEADER_SIZE + (seed >> 33) % (b.size - MT_HEADER_SIZE);
			/* most damage lands where records are */
			if (iter % 4)
				pos = MT_HEADER_SIZE + 32 + (seed >> 33) % 200 + (iter % 2) * CHUNK;
			copy[pos] = (uint8_t)(seed >> 17);
		}
		int r = read_all(copy, b.size, &records, &err);
		CHECK(r <= 0);
		free(copy);
	}
	tb_free_buf(&b);
}

/* TSC ticks become ns by the line through the earliest and latest pairs. */
static void test_clock_fit(void)
{
	struct mt_clock_fit fit = {.clock = MT_CLOCK_TSC};
	struct mt_error err = {0};
	struct mt_chunk_header *ch;
	struct mt_trace t;
	struct tb b;

	CHECK_EQ(mt_clock_ns(&fit, 1234), 1234); /* no pair: nothing better to say */
	mt_clock_fit_add(&fit, 3000, 1000);
	mt_clock_fit_add(&fit, 9000, 3000);
	mt_clock_fit_add(&fit, 6000, 2000);
	CHECK_EQ(mt_clock_ns(&fit, 3000), 1000);
	CHECK_EQ(mt_clock_ns(&fit, 4500), 1500);
	CHECK_EQ(mt_clock_ns(&fit, 12000), 4000);
	fit.clock = MT_CLOCK_MONOTONIC_NS;
	CHECK_EQ(mt_clock_ns(&fit, 4500), 4500);

	tb_init(&b, CHUNK);
	((struct mt_file_header *)b.buf)->clock = MT_CLOCK_TSC;
	tb_chunk(&b, 1, 1, 1, 30000);
	ch = (struct mt_chunk_header *)(b.buf + b.chunk);
	ch->base_ns = 10000;
	tb_chunk(&b, 1, 1, 2, 60000);
	ch = (struct mt_chunk_header *)(b.buf + b.chunk);
	ch->base_ns = 20000;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_clock_ns(&t.fit, 45000), 15000);
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/*
 * REACH and REACH_BLOCKS leave the chunk's registers alone (a reader that
 * skips them reads on right); a class that does not exist, or fewer
 * addresses than the record says, is an error at the record.
 */
static void test_reach_records(void)
{
	static const uint64_t two[] = {0x9000, 0x8000};
	static struct mt_record rec;
	struct mt_error err = {0};
	struct mt_cursor c;
	struct mt_trace t;
	size_t at;
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_alloc(&b, 1001, MT_FN_MALLOC, 0x5000, 10, 0);
	tb_reach(&b, 2000, MT_REACH_DONE, 0, 1, 10, 4096, 77);
	tb_reach_blocks(&b, MT_REACH_DEFINITE, 2, two);
	tb_free(&b, 1002, 0x5000); /* its address is a delta of 0 on the chunk's register */
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.type, MT_REC_FREE);
	CHECK_EQ(rec.time, 1002);
	CHECK_EQ(rec.u.free.addr, 0x5000);
	mt_reader_close(&t);
	tb_free_buf(&b);

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	at = tb_reach_blocks(&b, 5, 2, two);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK_STR(err.message, "REACH_BLOCKS record of class 5, which does not exist");
	mt_reader_close(&t);
	tb_free_buf(&b);

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_u(&b, MT_REACH_REACHABLE);
	tb_u(&b, 3); /* three addresses said, two written */
	tb_u(&b, mt_zigzag(0x9000));
	tb_u(&b, mt_zigzag(-0x1000));
	at = tb_end(&b, MT_REC_REACH_BLOCKS);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, at);
	CHECK_STR(err.message, "REACH_BLOCKS record: field 5 is cut off by the record's length or "
	                       "is not a valid varint");
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/* Seals the chunk being written: its checksum, as the writer gives it up with. */
static void seal(struct tb *b)
{
	struct mt_chunk_header *ch = (struct mt_chunk_header *)(b->buf + b->chunk);

	ch->crc32c = mt_crc32c(b->buf + b->chunk + sizeof(*ch), b->pos - b->chunk - sizeof(*ch));
}

/*
 * The open's checksum walk skims a sealed chunk of events alone (reader.h,
 * mt_chunk_slot): its figures are mt_cursor_skim's, times out of order and
 * ties included; a chunk with any other record, one not sealed and one that
 * fails its checksum are left to the first pass.
 */
static void test_open_skims(void)
{
	static struct mt_record rec;
	struct mt_error err = {0};
	struct mt_skim sk;
	struct mt_cursor c;
	struct mt_trace t;
	struct tb b;
	size_t last;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 0);
	tb_process(&b, 1, 100, 1, 0, 0, "/p", "p", 1);
	tb_alloc(&b, 5, MT_FN_MALLOC, 0x1000, 8, 1);
	seal(&b); /* 0: a PROCESS */
	tb_chunk(&b, 1, 100, 100, 40);
	tb_short_malloc(&b, 50, 0x2000, 16, 2);
	tb_alloc(&b, 40, MT_FN_CALLOC, 0x3000, 16, 3);
	tb_short_free(&b, 60, 0x2000);
	last = tb_free(&b, 60, 0x3000);
	tb_short_malloc(&b, 45, 0x4000, 16, 2);
	seal(&b); /* 1: skimmed */
	tb_chunk(&b, 1, 100, 100, 70);
	tb_short_malloc(&b, 71, 0x5000, 16, 2);
	tb_sample(&b, 72, 1000, (const uint64_t[MT_SAMPLE_FIELD_COUNT]){0}, MT_SAMPLE_FIELD_COUNT);
	seal(&b); /* 2: a SAMPLE */
	tb_chunk(&b, 1, 100, 100, 80);
	tb_short_free(&b, 81, 0x5000); /* 3: not sealed */
	tb_chunk(&b, 1, 100, 100, 90);
	tb_short_malloc(&b, 91, 0x6000, 16, 2);
	seal(&b);
	b.buf[b.pos - 1] ^= 1; /* 4: damaged */
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_reader_chunk_slots(&t), 5);
	CHECK(!t.slots[0].skimmed);
	CHECK(t.slots[1].skimmed);
	CHECK_EQ(t.slots[1].skim.events, 5);
	CHECK_EQ(t.slots[1].skim.first_time, 40);
	CHECK_EQ(t.slots[1].skim.last_time, 60);
	CHECK_EQ(t.slots[1].skim.latest_time, 60);
	CHECK_EQ(t.slots[1].skim.latest_offset, last); /* the later of the two at 60 */
	CHECK_EQ(mt_cursor_init(&c, &t, 1, &err), 1);
	c.skim_events = true;
	CHECK_EQ(mt_cursor_skim(&c, &sk, &rec, &err), 0);
	CHECK(!memcmp(&sk, &t.slots[1].skim, sizeof(sk)));
	CHECK(!t.slots[2].skimmed);
	CHECK(!t.slots[3].skimmed);
	CHECK_EQ(t.slots[4].state, MT_SLOT_DAMAGED);
	CHECK(!t.slots[4].skimmed);
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/*
 * A short malloc or free at time whose fields, drawn from r's bits, are 1 to
 * 10 bytes long: the address a step up or down from *addr, which it moves.
 */
static void random_short(struct tb *b, uint64_t r, uint64_t time, uint64_t *addr)
{
	uint64_t size = r >> (64 - 1 - (r >> 16) % 40);
	uint32_t stack = (r >> 22) % 4 == 0 ? 7 : (uint32_t)(r >> (64 - 1 - (r >> 24) % 31));

	*addr += (r >> 9 & 1 ? 1 : -1) * (uint64_t)(r >> (64 - 1 - (r >> 10) % 47) & ~15ull);
	if (r >> 30 & 1)
		tb_short_free(b, time, *addr);
	else
		tb_short_malloc(b, time, *addr, size, stack);
}

/*
 * The open's walk reads short records a word or two at a time where the CPU
 * can (BMI2): its figures are mt_cursor_skim's for records whose fields are
 * 1 to 10 bytes long, in every mix (ending in the first word, in the second,
 * or past it), their times going up, down and standing still, up to the
 * chunk's end, where the walk reads a byte at a time.
 */
static void test_open_skims_words(void)
{
	static struct mt_record rec;
	struct mt_error err = {0};
	uint64_t r = 88172645463325252ull, time = 1ull << 50, addr = 0x10000;
	struct mt_skim sk;
	struct mt_cursor c;
	struct mt_trace t;
	struct tb b;

	tb_init(&b, CHUNK);
	for (unsigned k = 0; k < 4; k++) {
		tb_chunk(&b, 1, 100, 100, time);
		while (b.pos - b.chunk < CHUNK - 40) {
			uint64_t step;
			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			step = (r & 7) == 0 ? 0 : r >> (64 - 1 - (r >> 3) % 40);
			time = r >> 8 & 1 ? time + step : time - step;
			random_short(&b, r, time, &addr);
		}
		seal(&b);
	}
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_reader_chunk_slots(&t), 4);
	for (unsigned k = 0; k < 4; k++) {
		CHECK(t.slots[k].skimmed);
		CHECK_EQ(mt_cursor_init(&c, &t, k, &err), 1);
		c.skim_events = true;
		CHECK_EQ(mt_cursor_skim(&c, &sk, &rec, &err), 0);
		CHECK(sk.events > 100);
		CHECK(!memcmp(&sk, &t.slots[k].skim, sizeof(sk)));
	}
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/*
 * include/memtrace/bytes.h, the one reading of a byte count that
 * MEMTRACE_SAMPLING, memtrace run --sampling and check's limits share.
 */
/*
 * The stack register of short records: a step from the last short malloc's
 * stack (up and down), untouched by a long ALLOC, 0 again in each chunk; a
 * given-up chunk's checksum covers them; one that runs past the end of its
 * chunk (not a cut file) is an error that names it.
 */
static void test_short_records(void)
{
	static const struct {
		uint32_t stack;
		uint8_t written_as;
	} want[] = {{40, MT_REC_SHORT_MALLOC}, {40, MT_REC_SHORT_MALLOC_SAME},
	            {9, MT_REC_ALLOC},         {3, MT_REC_SHORT_MALLOC},
	            {40, MT_REC_SHORT_MALLOC}, {40, MT_REC_SHORT_MALLOC}};
	static struct mt_record rec;
	struct mt_error err = {0};
	struct mt_chunk_header *ch;
	struct mt_cursor c;
	struct mt_trace t;
	struct tb b;
	size_t off[6], second;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	off[0] = tb_short_malloc(&b, 1001, 0x1000, 16, 40);
	off[1] = tb_short_malloc(&b, 1002, 0x1020, 16, 40);
	off[2] = tb_alloc(&b, 1003, MT_FN_CALLOC, 0x1040, 16, 9);
	off[3] = tb_short_malloc(&b, 1004, 0x1060, 16, 3);
	off[4] = tb_short_malloc(&b, 1005, 0x1080, 16, 40);
	ch = (struct mt_chunk_header *)(b.buf + b.chunk);
	ch->crc32c = mt_crc32c(b.buf + b.chunk + sizeof(*ch), b.pos - b.chunk - sizeof(*ch));
	tb_chunk(&b, 1, 100, 100, 2000);
	second = b.chunk;
	off[5] = tb_short_malloc(&b, 2001, 0x2000, 16, 40);
	CHECK_EQ(b.buf[off[5]], MT_REC_SHORT_MALLOC); /* the register starts at 0 again */
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	for (unsigned i = 0; i < 6; i++) {
		if (i == 0 || i == 5)
			CHECK_EQ(mt_cursor_init(&c, &t, i == 0 ? 0 : 1, &err), 1);
		CHECK(!c.chunk.damaged);
		CHECK_EQ(b.buf[off[i]], want[i].written_as);
		CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
		CHECK_EQ(rec.type, MT_REC_ALLOC);
		CHECK_EQ(rec.offset, off[i]);
		CHECK_EQ(rec.u.alloc.stack, want[i].stack);
	}
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 0);
	mt_reader_close(&t);

	/* a size field that runs into the chunk's end: no zero byte stops it */
	memset(b.buf + second + sizeof(*ch), 0xff, CHUNK - sizeof(*ch));
	b.buf[second + sizeof(*ch)] = MT_REC_SHORT_MALLOC;
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 1, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), -EBADMSG);
	CHECK_EQ(err.offset, second + sizeof(*ch));
	CHECK_STR(err.message, "SHORT_MALLOC record: field 1 runs past the end of its chunk or is "
	                       "not a valid varint");
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/* An event read in a run is the one mt_cursor_next_fast reads, field for field. */
static void same_event(const struct mt_event *a, const struct mt_event *b)
{
	CHECK_EQ(a->type, b->type);
	CHECK_EQ(a->offset, b->offset);
	CHECK_EQ(a->length, b->length);
	CHECK_EQ(a->time, b->time);
	CHECK_EQ(a->addr, b->addr);
	CHECK_EQ(a->size, b->size);
	CHECK_EQ(a->stack, b->stack);
	CHECK_EQ(a->fn, b->fn);
}

/*
 * mt_cursor_next_events reads what mt_cursor_next_fast reads one at a time,
 * at most n, and stops before a record that is not an event it reads.
 */
static void test_next_events(void)
{
	static struct mt_record rec;
	struct mt_error err = {0};
	struct mt_event run[16], one;
	struct mt_cursor c, d;
	struct mt_trace t;
	struct tb b;
	size_t mmap_at;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	tb_short_malloc(&b, 1001, 0x1000, 16, 40);
	tb_short_malloc(&b, 1002, 0x1020, 24, 40);
	tb_alloc(&b, 1003, MT_FN_CALLOC, 0x1040, 32, 9);
	tb_short_free(&b, 1004, 0x1000);
	mmap_at = tb_mmap(&b, 1005, 0x100000, 8192, 9);
	tb_short_malloc(&b, 1006, 0x1060, 48, 3);
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_init(&d, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next_events(&c, run, 2), 2);
	CHECK_EQ(mt_cursor_next_events(&c, run + 2, 16), 2);
	CHECK_EQ(mt_cursor_next_events(&c, run + 4, 16), 0);
	for (unsigned i = 0; i < 4; i++) {
		CHECK(mt_cursor_next_fast(&d, &one));
		same_event(&run[i], &one);
	}
	CHECK_EQ(run[3].type, MT_REC_FREE);
	CHECK_EQ(run[3].addr, 0x1000);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.type, MT_REC_MMAP);
	CHECK_EQ(rec.offset, mmap_at);
	CHECK_EQ(mt_cursor_next_events(&c, run, 16), 1);
	CHECK_EQ(run[0].time, 1006);
	CHECK_EQ(run[0].addr, 0x1060);
	CHECK_EQ(run[0].stack, 3);
	CHECK_EQ(mt_cursor_next_events(&c, run, 16), 0);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 0);
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/*
 * mt_cursor_next_events reads short records a word at a time where the CPU
 * can (BMI2), mt_cursor_next_fast a byte at a time: the same events from
 * records whose fields are 1 to 10 bytes long, in every mix, across the word
 * boundaries and past them (the loop of bytes then), and at a chunk's end.
 */
static void test_next_events_words(void)
{
	struct mt_error err = {0};
	struct mt_event run[16], one;
	struct mt_cursor c, d;
	struct mt_trace t;
	uint64_t r = 88172645463325252ull, time = 1000, addr = 0x10000;
	size_t n = 0, got;
	struct tb b;

	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 100, 100, 1000);
	while (b.pos - b.chunk < CHUNK - 64) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		time += (r & 7) == 0 ? 1 : r >> (64 - 1 - (r >> 3) % 48);
		random_short(&b, r, time, &addr);
		n++;
	}
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_init(&d, &t, 0, &err), 1);
	for (size_t i = 0; i < n; i += got) {
		got = mt_cursor_next_events(&c, run, 16);
		CHECK(got > 0);
		for (size_t k = 0; k < got; k++) {
			CHECK(mt_cursor_next_fast(&d, &one));
			same_event(&run[k], &one);
		}
	}
	CHECK_EQ(mt_cursor_next_events(&c, run, 16), 0);
	CHECK(!mt_cursor_next_fast(&d, &one));
	mt_reader_close(&t);
	tb_free_buf(&b);
}

/* mt_record_span (trace-format.h) over a record of every type, short ones too. */
static void test_record_span(void)
{
	size_t off[MT_REC_TYPE_COUNT + 1];
	struct tb b;

	memset(off, 0, sizeof(off));
	build_all(&b, off);
	for (unsigned type = 1; type < MT_REC_TYPE_COUNT; type++) {
		size_t next = b.pos; /* the record after it: the least start past its own */

		CHECK(off[type] != 0);
		for (unsigned other = 1; other < MT_REC_TYPE_COUNT; other++)
			if (off[other] > off[type] && off[other] < next)
				next = off[other];
		CHECK_EQ(mt_record_span(b.buf + off[type]), next - off[type]);
	}
	tb_free_buf(&b);
}

static void test_parse_bytes(void)
{
	static const struct {
		const char *text;
		int ret;
		uint64_t bytes;
	} cases[] = {
	        {"0", 0, 0},
	        {"4096", 0, 4096},
	        {"64K", 0, 65536},
	        {"64k", 0, 65536},
	        {"512KiB", 0, 524288},
	        {"1M", 0, 1048576},
	        {"2MB", 0, 2097152},
	        {"1G", 0, 1073741824},
	        {"3T", 0, 3298534883328},
	        {"100B", 0, 100},
	        {"16777215T", 0, 18446742974197923840u},
	        {"16777216T", -EINVAL, 0},
	        {"18446744073709551616", -EINVAL, 0},
	        {"", -EINVAL, 0},
	        {"K", -EINVAL, 0},
	        {"-1", -EINVAL, 0},
	        {" 64K", -EINVAL, 0},
	        {"64Q", -EINVAL, 0},
	        {"64KiBs", -EINVAL, 0},
	        {"1.5M", -EINVAL, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 7;
		int r = mt_parse_bytes(cases[i].text, &v);

		CHECK_EQ(r, cases[i].ret);
		CHECK_EQ(v, cases[i].ret ? 7u : cases[i].bytes);
	}
	CHECK_EQ(mt_parse_bytes(NULL, &(uint64_t){0}), -EINVAL);
}

/*
 * A SAMPLE of a writer that knew fewer values reads the rest as 0, unknown,
 * even into a record that held a longer SAMPLE (or anything else) before.
 */
static void test_short_sample(void)
{
	uint64_t values[MT_SAMPLE_FIELD_COUNT];
	static struct mt_record rec;
	struct mt_error err = {0};
	struct mt_cursor c;
	struct mt_trace t;
	struct tb b;

	for (unsigned i = 0; i < MT_SAMPLE_FIELD_COUNT; i++)
		values[i] = 1000 + i;
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 1, 1, 100);
	tb_sample(&b, 200, 5000, values, MT_SAMPLE_FIELD_COUNT);
	tb_sample(&b, 300, 6000, values, 10); /* the ten values of the first version */
	CHECK_EQ(mt_reader_open_memory(&t, b.buf, b.size, &err), 0);
	CHECK_EQ(mt_cursor_init(&c, &t, 0, &err), 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.u.sample.values[MT_SAMPLE_FIELD_COUNT - 1], 1000 + MT_SAMPLE_FIELD_COUNT - 1);
	CHECK_EQ(mt_cursor_next(&c, &rec, &err), 1);
	CHECK_EQ(rec.u.sample.n, 10);
	CHECK_EQ(rec.u.sample.values[9], 1009);
	for (unsigned i = 10; i < MT_SAMPLE_FIELD_COUNT; i++)
		CHECK_EQ(rec.u.sample.values[i], 0);
	mt_reader_close(&t);
	tb_free_buf(&b);
}

int main(void)
{
	test_clock_fit();
	test_every_type();
	test_truncation();
	test_cut_records();
	test_header_errors();
	test_zero_type_and_unused_chunks();
	test_old_version(2);
	test_old_version(3);
	test_seq_order();
	test_corrupt_records();
	test_python_frames();
	test_reach_records();
	test_short_records();
	test_next_events();
	test_next_events_words();
	test_record_span();
	test_open_skims();
	test_open_skims_words();
	test_short_sample();
	test_random_damage();
	test_parse_bytes();
	if (test_failures)
		fprintf(stderr, "%d checks failed\n", test_failures);
	return test_failures ? 1 : 0;
}
