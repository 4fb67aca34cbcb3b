/* SPDX-License-Identifier: MIT */
/*
 * The test-side trace encoder (see trace-builder.h). It writes what the
 * format document says, independently of the preload's writer, so the
 * reader's tests check the reader against the document.
 *
 * May not: be linked into anything but tests.
 */
#include <stdlib.h>
#include <string.h>

#include <stdbool.h>

#include "trace-builder.h"

static void grow(struct tb *b, size_t size)
{
	b->buf = realloc(b->buf, size);
	if (!b->buf)
		abort();
	memset(b->buf + b->size, 0, size - b->size);
	b->size = size;
}

void tb_init(struct tb *b, uint32_t chunk_size)
{
	struct mt_file_header h = {0};

	memset(b, 0, sizeof(*b));
	b->chunk_size = chunk_size;
	b->version = MT_FORMAT_VERSION;
	grow(b, MT_HEADER_SIZE);
	memcpy(h.magic, MT_FILE_MAGIC, 8);
	h.version = MT_FORMAT_VERSION;
	h.header_size = MT_HEADER_SIZE;
	h.chunk_unit = MT_CHUNK_UNIT;
	h.byte_order = MT_BYTE_ORDER_MARK;
	h.next_chunk = MT_HEADER_SIZE;
	h.created_monotonic = 1000000;
	h.root_pid = 100;
	h.clock = MT_CLOCK_MONOTONIC_NS;
	memcpy(b->buf, &h, sizeof(h));
}

void tb_free_buf(struct tb *b)
{
	free(b->buf);
	b->buf = NULL;
}

void tb_chunk_magic(struct tb *b, uint32_t magic, uint32_t instance, uint32_t pid, uint32_t tid,
                    uint64_t base)
{
	/* a chunk never written is all zeros, its size too */
	struct mt_chunk_header ch = {
	        magic, instance, pid, tid, base, base, magic ? b->chunk_size : 0, 0, b->seq++};
	size_t hdr = b->version < 4 ? MT_CHUNK_HEADER_V3 : sizeof(ch);
	struct mt_file_header *h;

	b->chunk = b->size;
	grow(b, b->size + b->chunk_size);
	memcpy(b->buf + b->chunk, &ch, hdr);
	h = (struct mt_file_header *)b->buf;
	h->next_chunk = b->size;
	if (b->version >= 4)
		h->next_seq = b->seq;
	b->pos = b->chunk + hdr;
	b->time = base;
	b->addr = 0;
	b->stack = 0;
}

void tb_version(struct tb *b, uint32_t version)
{
	struct mt_file_header *h = (struct mt_file_header *)b->buf;

	b->version = version;
	h->version = version;
	memset((char *)h + offsetof(struct mt_file_header, next_seq), 0,
	       sizeof(*h) - offsetof(struct mt_file_header, next_seq));
}

void tb_chunk(struct tb *b, uint32_t instance, uint32_t pid, uint32_t tid, uint64_t base)
{
	tb_chunk_magic(b, MT_CHUNK_MAGIC, instance, pid, tid, base);
}

void tb_u(struct tb *b, uint64_t v)
{
	if (b->plen + MT_MAX_VARINT > sizeof(b->payload))
		abort();
	b->plen = (size_t)(mt_put_varint(b->payload + b->plen, v) - b->payload);
}

void tb_dt(struct tb *b, uint64_t time)
{
	tb_u(b, mt_zigzag((int64_t)(time - b->time)));
	b->time = time;
}

void tb_addr(struct tb *b, uint64_t addr)
{
	tb_u(b, mt_zigzag((int64_t)(addr - b->addr)));
	b->addr = addr;
}

void tb_str(struct tb *b, const void *s, size_t n)
{
	tb_u(b, n);
	if (b->plen + n > sizeof(b->payload))
		abort();
	memcpy(b->payload + b->plen, s, n);
	b->plen += n;
}

size_t tb_end(struct tb *b, uint8_t type)
{
	uint8_t len[MT_MAX_VARINT];
	size_t n = (size_t)(mt_put_varint(len, b->plen) - len), at = b->pos;

	if (!b->chunk || b->pos + 1 + n + b->plen > b->chunk + b->chunk_size)
		abort();
	b->buf[b->pos] = type;
	memcpy(b->buf + b->pos + 1, len, n);
	memcpy(b->buf + b->pos + 1 + n, b->payload, b->plen);
	b->pos += 1 + n + b->plen;
	b->plen = 0;
	return at;
}

size_t tb_process(struct tb *b, uint64_t t, uint32_t pid, uint32_t ppid, uint32_t origin,
                  uint32_t parent, const char *exe, const char *cmdline, size_t cmdline_len)
{
	tb_dt(b, t);
	tb_u(b, pid);
	tb_u(b, ppid);
	tb_u(b, origin);
	tb_u(b, parent);
	tb_u(b, 1700000000000000000ull);
	tb_str(b, exe, strlen(exe));
	tb_str(b, cmdline, cmdline_len);
	tb_u(b, 64);
	return tb_end(b, MT_REC_PROCESS);
}

static void native_frames(struct tb *b, uint32_t id, uint32_t n, const uint64_t *frames)
{
	tb_u(b, id);
	tb_u(b, 0);
	tb_u(b, n);
	for (uint32_t i = 0; i < n; i++)
		tb_u(b, i == 0 ? frames[0] : mt_zigzag((int64_t)(frames[i] - frames[i - 1])));
}

size_t tb_stack(struct tb *b, uint32_t id, uint32_t n, const uint64_t *frames)
{
	native_frames(b, id, n, frames);
	return tb_end(b, MT_REC_STACK);
}

size_t tb_stack_py(struct tb *b, uint32_t id, uint32_t n, const uint64_t *frames, uint64_t pystack)
{
	native_frames(b, id, n, frames);
	tb_u(b, pystack);
	return tb_end(b, MT_REC_STACK);
}

size_t tb_pystack(struct tb *b, uint64_t id, uint32_t n, const uint64_t *code,
                  const uint64_t *lasti)
{
	tb_u(b, id);
	tb_u(b, n);
	for (uint32_t i = 0; i < n; i++) {
		tb_u(b, code[i]);
		tb_u(b, lasti[i]);
	}
	return tb_end(b, MT_REC_PYSTACK);
}

size_t tb_pycode(struct tb *b, uint64_t id, unsigned version, uint64_t first_line, const char *file,
                 const char *name, const void *linetable, size_t len)
{
	tb_u(b, id);
	tb_u(b, version);
	tb_u(b, first_line);
	tb_str(b, file, strlen(file));
	tb_str(b, name, strlen(name));
	tb_str(b, linetable, len);
	tb_u(b, len);
	return tb_end(b, MT_REC_PYCODE);
}

size_t tb_alloc(struct tb *b, uint64_t t, unsigned fn, uint64_t addr, uint64_t size, uint32_t stack)
{
	tb_dt(b, t);
	tb_u(b, fn);
	tb_addr(b, addr);
	tb_u(b, size);
	tb_u(b, stack);
	return tb_end(b, MT_REC_ALLOC);
}

size_t tb_free(struct tb *b, uint64_t t, uint64_t addr)
{
	tb_dt(b, t);
	tb_u(b, MT_FN_FREE);
	tb_addr(b, addr);
	return tb_end(b, MT_REC_FREE);
}

/* A short record: the type byte and the payload built so far, no length. */
static size_t short_end(struct tb *b, uint8_t type)
{
	size_t at = b->pos;

	if (!b->chunk || b->pos + 1 + b->plen > b->chunk + b->chunk_size)
		abort();
	b->buf[b->pos] = type;
	memcpy(b->buf + b->pos + 1, b->payload, b->plen);
	b->pos += 1 + b->plen;
	b->plen = 0;
	return at;
}

size_t tb_short_malloc(struct tb *b, uint64_t t, uint64_t addr, uint64_t size, uint32_t stack)
{
	uint64_t last = b->stack;

	tb_dt(b, t);
	tb_addr(b, addr);
	tb_u(b, size);
	b->stack = stack;
	if (stack == last)
		return short_end(b, MT_REC_SHORT_MALLOC_SAME);
	tb_u(b, mt_zigzag((int64_t)(stack - last)));
	return short_end(b, MT_REC_SHORT_MALLOC);
}

size_t tb_short_free(struct tb *b, uint64_t t, uint64_t addr)
{
	tb_dt(b, t);
	tb_addr(b, addr);
	return short_end(b, MT_REC_SHORT_FREE);
}

size_t tb_realloc(struct tb *b, uint64_t t1, uint64_t t0, uint64_t old, uint64_t addr,
                  uint64_t size, uint32_t stack)
{
	tb_dt(b, t1);
	tb_u(b, t1 - t0);
	tb_u(b, MT_FN_REALLOC);
	tb_addr(b, old);
	tb_addr(b, addr);
	tb_u(b, size);
	tb_u(b, stack);
	return tb_end(b, MT_REC_REALLOC);
}

size_t tb_fail(struct tb *b, uint64_t t, unsigned fn, uint64_t size, uint32_t stack, uint32_t err)
{
	tb_dt(b, t);
	tb_u(b, fn);
	tb_u(b, size);
	tb_u(b, stack);
	tb_u(b, err);
	return tb_end(b, MT_REC_FAIL);
}

size_t tb_mmap(struct tb *b, uint64_t t, uint64_t addr, uint64_t len, uint32_t stack)
{
	tb_dt(b, t);
	tb_u(b, MT_FN_MMAP);
	tb_addr(b, addr);
	tb_u(b, len);
	tb_u(b, 3);
	tb_u(b, 0x22);
	tb_u(b, stack);
	return tb_end(b, MT_REC_MMAP);
}

size_t tb_munmap(struct tb *b, uint64_t t, uint64_t addr, uint64_t len)
{
	tb_dt(b, t);
	tb_addr(b, addr);
	tb_u(b, len);
	return tb_end(b, MT_REC_MUNMAP);
}

size_t tb_mremap(struct tb *b, uint64_t t1, uint64_t t0, uint64_t old, uint64_t old_len,
                 uint64_t addr, uint64_t len, uint32_t stack)
{
	tb_dt(b, t1);
	tb_u(b, t1 - t0);
	tb_addr(b, old);
	tb_u(b, old_len);
	tb_addr(b, addr);
	tb_u(b, len);
	tb_u(b, stack);
	return tb_end(b, MT_REC_MREMAP);
}

size_t tb_exit(struct tb *b, uint64_t t, unsigned how, unsigned status)
{
	tb_dt(b, t);
	tb_u(b, how);
	tb_u(b, status);
	return tb_end(b, MT_REC_EXIT);
}

size_t tb_sample(struct tb *b, uint64_t t, uint64_t ns, const uint64_t *values, unsigned n)
{
	tb_dt(b, t);
	tb_u(b, ns);
	tb_u(b, n);
	for (unsigned i = 0; i < n; i++)
		tb_u(b, values[i]);
	return tb_end(b, MT_REC_SAMPLE);
}

size_t tb_mark(struct tb *b, uint64_t t, const char *label)
{
	tb_dt(b, t);
	tb_str(b, label, strlen(label));
	return tb_end(b, MT_REC_MARK);
}

size_t tb_module(struct tb *b, uint64_t t, uint64_t base, const char *path)
{
	tb_dt(b, t);
	tb_u(b, base);
	tb_str(b, path, strlen(path));
	tb_str(b, "", 0);
	tb_u(b, 1);
	tb_u(b, 0);
	tb_u(b, 0x10000);
	tb_u(b, 5);
	return tb_end(b, MT_REC_MODULE);
}

size_t tb_exec(struct tb *b, uint64_t t, const char *path)
{
	tb_dt(b, t);
	tb_str(b, path, strlen(path));
	return tb_end(b, MT_REC_EXEC);
}

size_t tb_reach(struct tb *b, uint64_t time, unsigned status, uint64_t detail, uint64_t blocks,
                uint64_t bytes, uint64_t scanned, uint64_t ns)
{
	tb_u(b, time);
	tb_u(b, status);
	tb_u(b, detail);
	tb_u(b, blocks);
	tb_u(b, bytes);
	tb_u(b, scanned);
	tb_u(b, ns);
	return tb_end(b, MT_REC_REACH);
}

size_t tb_reach_blocks(struct tb *b, unsigned cls, uint32_t n, const uint64_t *addr)
{
	uint64_t prev = 0;

	tb_u(b, cls);
	tb_u(b, n);
	for (uint32_t i = 0; i < n; i++) {
		tb_u(b, mt_zigzag((int64_t)(addr[i] - prev)));
		prev = addr[i];
	}
	return tb_end(b, MT_REC_REACH_BLOCKS);
}

size_t tb_keyframe(struct tb *b, uint64_t round, uint32_t instance, uint64_t time, uint64_t events,
                   const uint64_t counts[4], uint32_t nkinds, const uint64_t *kinds)
{
	tb_u(b, round);
	tb_u(b, instance);
	tb_u(b, time);
	tb_u(b, events);
	for (int i = 0; i < 4; i++)
		tb_u(b, counts[i]);
	tb_u(b, nkinds);
	for (uint32_t i = 0; i < nkinds * TB_KIND_VALUES; i++)
		tb_u(b, kinds[i]);
	return tb_end(b, MT_REC_KEYFRAME);
}

size_t tb_key_items(struct tb *b, uint8_t type, uint32_t n, unsigned fields, const uint64_t *v)
{
	bool delta = type == MT_REC_KEY_BLOCKS || type == MT_REC_KEY_RANGES;
	uint64_t prev = 0;

	tb_u(b, n);
	for (uint32_t i = 0; i < n; i++) {
		for (unsigned f = 0; f < fields; f++) {
			uint64_t x = v[i * fields + f];
			tb_u(b, f == 0 && delta ? mt_zigzag((int64_t)(x - prev)) : x);
			if (f == 0)
				prev = x;
		}
	}
	return tb_end(b, type);
}

size_t tb_key_end(struct tb *b, uint32_t instance, uint64_t round)
{
	tb_u(b, instance);
	tb_u(b, round);
	return tb_end(b, MT_REC_KEY_END);
}

size_t tb_round(struct tb *b, uint64_t round, uint64_t time, uint64_t usable, uint64_t instances)
{
	tb_u(b, round);
	tb_u(b, time);
	tb_u(b, usable);
	tb_u(b, instances);
	return tb_end(b, MT_REC_ROUND);
}

size_t tb_copy(struct tb *b, uint32_t instance, uint64_t seq)
{
	tb_u(b, instance);
	tb_u(b, seq);
	return tb_end(b, MT_REC_COPY);
}
