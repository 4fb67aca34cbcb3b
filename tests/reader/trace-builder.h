/* SPDX-License-Identifier: MIT */
/*
 * A tiny trace encoder for the reader's tests: builds a trace in memory,
 * chunk by chunk, with the helpers of trace-format.h. Times and addresses
 * are given absolute; the builder keeps the chunk's registers and writes
 * the deltas, as the preload does.
 *
 * May not: be used outside tests (it aborts on misuse rather than failing).
 */
#ifndef MEMTRACE_TESTS_TRACE_BUILDER_H
#define MEMTRACE_TESTS_TRACE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include <memtrace/trace-format.h>

struct tb {
	uint8_t *buf;
	size_t size;
	uint32_t chunk_size; /* of every chunk: a multiple of MT_CHUNK_UNIT */
	size_t chunk;        /* offset of the chunk being written, 0 if none */
	size_t pos;          /* next record's offset */
	uint64_t time, addr, stack;
	uint8_t payload[16384];
	size_t plen;
	uint64_t seq;     /* the next chunk's */
	uint32_t version; /* of the chunk headers written: MT_FORMAT_VERSION unless tb_version */
};

void tb_init(struct tb *b, uint32_t chunk_size);
void tb_free_buf(struct tb *b);
/* Appends a zeroed chunk; magic 0 leaves it claimed but unwritten. */
void tb_chunk_magic(struct tb *b, uint32_t magic, uint32_t instance, uint32_t pid, uint32_t tid,
                    uint64_t base);
void tb_chunk(struct tb *b, uint32_t instance, uint32_t pid, uint32_t tid, uint64_t base);
/* A version 2 or 3 trace: the file header says so and ends at `extended`, and chunk headers
 * have no seq. Call before the first chunk. */
void tb_version(struct tb *b, uint32_t version);

/* Payload building, then tb_end writes type | length | payload; returns the record's offset. */
void tb_u(struct tb *b, uint64_t v);
void tb_dt(struct tb *b, uint64_t time);
void tb_addr(struct tb *b, uint64_t addr);
void tb_str(struct tb *b, const void *s, size_t n);
size_t tb_end(struct tb *b, uint8_t type);

size_t tb_process(struct tb *b, uint64_t t, uint32_t pid, uint32_t ppid, uint32_t origin,
                  uint32_t parent, const char *exe, const char *cmdline, size_t cmdline_len);
size_t tb_stack(struct tb *b, uint32_t id, uint32_t n, const uint64_t *frames);
/* A STACK naming the PYSTACK of its Python frames (0 written out: none). */
size_t tb_stack_py(struct tb *b, uint32_t id, uint32_t n, const uint64_t *frames, uint64_t pystack);
/* A PYSTACK: code[i] is written as is (code id << 1 | entry), then lasti[i]. */
size_t tb_pystack(struct tb *b, uint64_t id, uint32_t n, const uint64_t *code,
                  const uint64_t *lasti);
size_t tb_pycode(struct tb *b, uint64_t id, unsigned version, uint64_t first_line, const char *file,
                 const char *name, const void *linetable, size_t len);
size_t tb_alloc(struct tb *b, uint64_t t, unsigned fn, uint64_t addr, uint64_t size,
                uint32_t stack);
size_t tb_free(struct tb *b, uint64_t t, uint64_t addr);
/* Short records, as the preload writes a malloc and a free: SHORT_MALLOC_SAME when the stack is
 * the chunk's stack register, else SHORT_MALLOC with the step from it. */
size_t tb_short_malloc(struct tb *b, uint64_t t, uint64_t addr, uint64_t size, uint32_t stack);
size_t tb_short_free(struct tb *b, uint64_t t, uint64_t addr);
size_t tb_realloc(struct tb *b, uint64_t t1, uint64_t t0, uint64_t old, uint64_t addr,
                  uint64_t size, uint32_t stack);
size_t tb_fail(struct tb *b, uint64_t t, unsigned fn, uint64_t size, uint32_t stack, uint32_t err);
size_t tb_mmap(struct tb *b, uint64_t t, uint64_t addr, uint64_t len, uint32_t stack);
size_t tb_munmap(struct tb *b, uint64_t t, uint64_t addr, uint64_t len);
size_t tb_mremap(struct tb *b, uint64_t t1, uint64_t t0, uint64_t old, uint64_t old_len,
                 uint64_t addr, uint64_t len, uint32_t stack);
size_t tb_exit(struct tb *b, uint64_t t, unsigned how, unsigned status);
/* A SAMPLE with n values in enum mt_sample_field order; ns is its CLOCK_MONOTONIC pair. */
size_t tb_sample(struct tb *b, uint64_t t, uint64_t ns, const uint64_t *values, unsigned n);
size_t tb_mark(struct tb *b, uint64_t t, const char *label);
/* A MODULE at base: one executable segment of 64 KiB at its start, no build id. */
size_t tb_module(struct tb *b, uint64_t t, uint64_t base, const char *path);
size_t tb_exec(struct tb *b, uint64_t t, const char *path);
/* A REACH: the scan at `time` (whole ticks), its status and figures. */
size_t tb_reach(struct tb *b, uint64_t time, unsigned status, uint64_t detail, uint64_t blocks,
                uint64_t bytes, uint64_t scanned, uint64_t ns);
/* A REACH_BLOCKS of class cls naming addr[0..n), deltas on the record's own register. */
size_t tb_reach_blocks(struct tb *b, unsigned cls, uint32_t n, const uint64_t *addr);

/* The ring consumer's records (docs/trace-format.md, 24 to 31). */
/* kinds: nkinds x 11 values, in the record's order (kind, allocations, ... inherited_blocks) */
#define TB_KIND_VALUES 11
size_t tb_keyframe(struct tb *b, uint64_t round, uint32_t instance, uint64_t time, uint64_t events,
                   const uint64_t counts[4], uint32_t nkinds, const uint64_t *kinds);
/* A KEY_THREADS, KEY_BLOCKS, KEY_RANGES or KEY_STACKS of n items of `fields` values each,
 * addresses (the first field of blocks and ranges) absolute: written as deltas. */
size_t tb_key_items(struct tb *b, uint8_t type, uint32_t n, unsigned fields, const uint64_t *v);
size_t tb_key_end(struct tb *b, uint32_t instance, uint64_t round);
size_t tb_round(struct tb *b, uint64_t round, uint64_t time, uint64_t usable, uint64_t instances);
size_t tb_copy(struct tb *b, uint32_t instance, uint64_t seq);

#endif
