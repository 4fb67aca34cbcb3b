/* SPDX-License-Identifier: MIT */
/*
 * Rewrites a real trace with small chunks, for the fuzzer's corpus:
 * `rechunk IN OUT [MAX_BYTES]`. The preload writes 256 KiB chunks, mostly
 * zeros, too big for a useful fuzz input; this decodes every record with the
 * reader and encodes it again with the trace builder into 4096-byte chunks
 * (a thread's records split over as many chunks as they need, in order), so
 * what the preload really writes (module lists, build ids, deep stacks, the
 * TSC clock) reaches the fuzzer in a few KiB. It stops before the output
 * would pass MAX_BYTES (default 60 KiB); a record too big for a small chunk
 * is left out and counted.
 *
 * May not: be installed; it is a test fixture.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"
#include "trace-builder.h"

#define CHUNK 4096u

/* The CUDA functions write the kind; for the others it follows from fn. */
static bool explicit_kind(uint64_t fn, uint64_t kind)
{
	return fn >= MT_FN_CUDA_MALLOC || kind != mt_fn_kind((unsigned)fn);
}

/* The payload of rec, against the builder's registers. */
static void encode(struct tb *b, const struct mt_record *rec)
{
	switch (rec->type) {
	case MT_REC_PROCESS:
		tb_dt(b, rec->time);
		tb_u(b, rec->u.process.pid);
		tb_u(b, rec->u.process.ppid);
		tb_u(b, rec->u.process.origin);
		tb_u(b, rec->u.process.parent_instance);
		tb_u(b, rec->u.process.realtime);
		tb_str(b, rec->u.process.exe.data, rec->u.process.exe.len);
		tb_str(b, rec->u.process.cmdline.data, rec->u.process.cmdline.len);
		tb_u(b, rec->u.process.depth);
		break;
	case MT_REC_MODULE:
		tb_dt(b, rec->time);
		tb_u(b, rec->u.module.base);
		tb_str(b, rec->u.module.path.data, rec->u.module.path.len);
		tb_str(b, rec->u.module.build_id.data, rec->u.module.build_id.len);
		tb_u(b, rec->u.module.nseg);
		for (uint32_t i = 0; i < rec->u.module.nseg; i++) {
			tb_u(b, rec->u.module.seg[i].vaddr);
			tb_u(b, rec->u.module.seg[i].memsz);
			tb_u(b, rec->u.module.seg[i].flags);
		}
		break;
	case MT_REC_MODULE_GONE:
		tb_dt(b, rec->time);
		tb_u(b, rec->u.module_gone.base);
		tb_u(b, rec->u.module_gone.gen);
		break;
	case MT_REC_STACK:
		tb_u(b, rec->u.stack.id);
		tb_u(b, rec->u.stack.gen);
		tb_u(b, rec->u.stack.n);
		for (uint32_t i = 0; i < rec->u.stack.n; i++)
			tb_u(b, i == 0 ? rec->u.stack.frames[0]
				       : mt_zigzag((int64_t)(rec->u.stack.frames[i] - rec->u.stack.frames[i - 1])));
		break;
	case MT_REC_ALLOC:
		tb_dt(b, rec->time);
		tb_u(b, rec->u.alloc.fn);
		tb_addr(b, rec->u.alloc.addr);
		tb_u(b, rec->u.alloc.size);
		tb_u(b, rec->u.alloc.stack);
		if (explicit_kind(rec->u.alloc.fn, rec->u.alloc.kind))
			tb_u(b, rec->u.alloc.kind);
		break;
	case MT_REC_FREE:
		tb_dt(b, rec->time);
		tb_u(b, rec->u.free.fn);
		tb_addr(b, rec->u.free.addr);
		if (explicit_kind(rec->u.free.fn, rec->u.free.kind))
			tb_u(b, rec->u.free.kind);
		break;
	case MT_REC_REALLOC:
		tb_dt(b, rec->time);
		tb_u(b, rec->time - rec->u.realloc.t0);
		tb_u(b, rec->u.realloc.fn);
		tb_addr(b, rec->u.realloc.old);
		tb_addr(b, rec->u.realloc.addr);
		tb_u(b, rec->u.realloc.size);
		tb_u(b, rec->u.realloc.stack);
		break;
	case MT_REC_FAIL:
		tb_dt(b, rec->time);
		tb_u(b, rec->u.fail.fn);
		tb_u(b, rec->u.fail.size);
		tb_u(b, rec->u.fail.stack);
		tb_u(b, rec->u.fail.err);
		if (explicit_kind(rec->u.fail.fn, rec->u.fail.kind) || rec->u.fail.device_total) {
			tb_u(b, rec->u.fail.kind);
			tb_u(b, rec->u.fail.device_free);
			tb_u(b, rec->u.fail.device_total);
		}
		break;
	case MT_REC_MMAP:
		tb_dt(b, rec->time);
		tb_u(b, rec->u.mmap.fn);
		tb_addr(b, rec->u.mmap.addr);
		tb_u(b, rec->u.mmap.len);
		tb_u(b, rec->u.mmap.prot);
		tb_u(b, rec->u.mmap.flags);
		tb_u(b, rec->u.mmap.stack);
		break;
	case MT_REC_MUNMAP:
		tb_dt(b, rec->time);
		tb_addr(b, rec->u.munmap.addr);
		tb_u(b, rec->u.munmap.len);
		break;
	case MT_REC_MREMAP:
		tb_dt(b, rec->time);
		tb_u(b, rec->time - rec->u.mremap.t0);
		tb_addr(b, rec->u.mremap.old);
		tb_u(b, rec->u.mremap.old_len);
		tb_addr(b, rec->u.mremap.addr);
		tb_u(b, rec->u.mremap.len);
		tb_u(b, rec->u.mremap.stack);
		break;
	case MT_REC_SAMPLE: {
		uint64_t n = rec->u.sample.n < MT_SAMPLE_FIELD_COUNT ? rec->u.sample.n : MT_SAMPLE_FIELD_COUNT;
		tb_dt(b, rec->time);
		tb_u(b, rec->u.sample.ns);
		tb_u(b, n);
		for (uint64_t i = 0; i < n; i++)
			tb_u(b, rec->u.sample.values[i]);
		break;
	}
	case MT_REC_EXIT:
		tb_dt(b, rec->time);
		tb_u(b, rec->u.exit.how);
		tb_u(b, rec->u.exit.status);
		tb_u(b, rec->u.exit.ns);
		break;
	case MT_REC_LOST:
		tb_u(b, rec->u.lost.reason);
		tb_u(b, rec->u.lost.count);
		break;
	case MT_REC_MARK:
		tb_dt(b, rec->time);
		tb_str(b, rec->u.mark.label.data, rec->u.mark.label.len);
		break;
	default:
		break; /* unknown types are left out by the caller */
	}
}

static bool fits(const struct tb *b)
{
	return b->pos + 1 + MT_MAX_VARINT + b->plen <= b->chunk + b->chunk_size;
}

/* Starts an output chunk for the thread of ch, its time register at `base`. */
static bool new_chunk(struct tb *b, const struct mt_trace *t, const struct mt_chunk *ch,
		      uint64_t base, size_t max)
{
	struct mt_chunk_header *h;

	if (b->size + b->chunk_size > max)
		return false;
	tb_chunk(b, ch->instance, ch->pid, ch->tid, base);
	h = (struct mt_chunk_header *)(b->buf + b->chunk);
	h->base_ns = base == ch->base_ticks ? ch->base_ns : mt_clock_ns(&t->fit, base);
	return true;
}

int main(int argc, char **argv)
{
	struct mt_trace t;
	struct mt_error err = { 0 };
	struct mt_record rec;
	struct mt_file_header *h;
	size_t max = argc > 3 ? strtoull(argv[3], NULL, 0) : 60 * 1024;
	uint64_t records = 0, skipped = 0;
	bool full = false;
	struct tb b;
	FILE *f;
	int r;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s IN OUT [MAX_BYTES]\n", argv[0]);
		return 2;
	}
	if (mt_reader_open(&t, argv[1], &err) < 0) {
		fprintf(stderr, "%s: at byte %llu: %s\n", argv[1], (unsigned long long)err.offset, err.message);
		return 1;
	}
	tb_init(&b, CHUNK);
	h = (struct mt_file_header *)b.buf;
	h->next_instance = t.header.next_instance;
	h->created_realtime = t.header.created_realtime;
	h->created_monotonic = t.header.created_monotonic;
	h->root_pid = t.header.root_pid;
	h->clock = t.header.clock;
	for (uint64_t i = 0; i < mt_reader_chunk_slots(&t) && !full; i++) {
		struct mt_cursor c;

		if (mt_cursor_init(&c, &t, i, &err) <= 0)
			continue;
		if (!new_chunk(&b, &t, &c.chunk, c.chunk.base_ticks, max))
			break;
		while ((r = mt_cursor_next(&c, &rec, &err)) > 0) {
			uint64_t time = b.time, addr = b.addr;

			if (rec.type >= MT_REC_TYPE_COUNT) {
				skipped++;
				continue;
			}
			encode(&b, &rec);
			if (!fits(&b)) {
				b.plen = 0;
				b.time = time;
				b.addr = addr;
				if (!new_chunk(&b, &t, &c.chunk, time, max)) {
					full = true;
					break;
				}
				encode(&b, &rec);
				if (!fits(&b)) {
					b.plen = 0;
					b.time = time;
					b.addr = 0;
					skipped++;
					continue;
				}
			}
			tb_end(&b, (uint8_t)rec.type);
			records++;
		}
		if (r < 0)
			fprintf(stderr, "%s: at byte %llu: %s\n", argv[1], (unsigned long long)err.offset,
				err.message);
	}
	f = fopen(argv[2], "wb");
	if (!f || fwrite(b.buf, 1, b.size, f) != b.size || fclose(f)) {
		perror(argv[2]);
		return 1;
	}
	fprintf(stderr, "%s: %llu records in %zu bytes, %llu left out%s\n", argv[2],
		(unsigned long long)records, b.size, (unsigned long long)skipped,
		full ? ", cut at the size limit" : "");
	tb_free_buf(&b);
	mt_reader_close(&t);
	return 0;
}
