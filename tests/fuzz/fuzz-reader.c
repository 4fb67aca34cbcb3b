/* SPDX-License-Identifier: MIT */
/*
 * The fuzz target of the reader and the replay: whatever the bytes, opening
 * them as a trace, walking every chunk and record, and replaying every
 * instance must not crash, hang, leak, or read outside the input. The
 * analyzer meets files cut by a kill, a full disk, or plain corruption, and
 * it may only answer with a negative errno and an offset.
 *
 * Every field the reader or the replay hands out is read and folded into a
 * sink, so that ASan checks each pointer and length it returns and UBSan
 * each value a report would compute with (mt_clock_ns() included). Every
 * name (argv, executable, module path, mark) is escaped as the commands
 * print it, and the escape checked: valid UTF-8, no control character
 * where text asks for none, read back to the very bytes, cut only between
 * whole escapes.
 *
 * Built by build-fuzzer with libFuzzer, and by meson with fuzz-main.c,
 * which runs the committed corpus and crashes as the 'fuzz' suite.
 *
 * May not: print, keep state between inputs, or depend on anything but the
 * input (libFuzzer needs a deterministic target).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "pyframes.h"
#include "pystacks.h"
#include "reader.h"
#include "replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What every read lands in; volatile so the compiler cannot drop the reads. */
static volatile uint64_t sink;

static void mix(uint64_t *h, uint64_t v)
{
	*h = (*h ^ v) * 0x100000001b3ull;
}

static void mix_bytes(uint64_t *h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		mix(h, p[i]);
}

static void check(bool ok)
{
	if (!ok)
		__builtin_trap();
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * Whether the n bytes at p are well-formed UTF-8, by the Unicode
 * standard's table of well-formed byte sequences (Table 3-7): written
 * apart from escape.c's decoder so that one does not vouch for itself.
 */
static bool well_formed(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = p[i], lo = 0x80, hi = 0xbf;
		size_t len;

		if (c <= 0x7f) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		else
			return false;
		if (i + len > n || p[i + 1] < lo || p[i + 1] > hi)
			return false;
		for (size_t k = 2; k < len; k++)
			if (p[i + k] < 0x80 || p[i + k] > 0xbf)
				return false;
		i += len;
	}
	return true;
}

/* e (n bytes, escaped with flags) read back must be the len bytes at raw. */
static void check_unescape(const char *e, size_t n, unsigned flags, const uint8_t *raw, size_t len)
{
	size_t at = 0;

	for (size_t i = 0; i < n; at++) {
		check(at < len);
		if (e[i] != '\\') {
			check((uint8_t)e[i++] == raw[at]);
			continue;
		}
		check(i + 1 < n);
		if (e[i + 1] == '\\' || (e[i + 1] == '"' && (flags & MT_ESCAPE_QUOTE))) {
			check((uint8_t)e[i + 1] == raw[at]);
			i += 2;
			continue;
		}
		check(i + 3 < n && e[i + 1] == 'x' && hex_digit(e[i + 2]) >= 0 &&
		      hex_digit(e[i + 3]) >= 0);
		check((hex_digit(e[i + 2]) << 4 | hex_digit(e[i + 3])) == raw[at]);
		i += 4;
	}
	check(at == len);
}

/* What escaping the len bytes at raw with flags must give (escape.h). */
static void check_escape(const uint8_t *raw, size_t len, unsigned flags)
{
	size_t n = mt_escape(NULL, 0, raw, len, flags), cut, slashes = 0;
	char *e = malloc(n + 1), *part;

	check(e != NULL);
	check(mt_escape(e, n + 1, raw, len, flags) == n && e[n] == 0);
	check_unescape(e, n, flags, raw, len);
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)e[i];
		slashes += c == '\\';
		/* no C0, DEL or C1 (UTF-8 c2 80..c2 9f) reaches a terminal */
		if (flags & MT_ESCAPE_CONTROL)
			check(c >= 0x20 && c != 0x7f &&
			      !(c == 0xc2 && i + 1 < n && (uint8_t)e[i + 1] < 0xa0));
	}
	check(well_formed((const uint8_t *)e, n));
	/* and escaped again, only its backslashes change, each doubled */
	check(mt_escape(NULL, 0, e, n, 0) == n + slashes);
	/* a buffer too small holds the longest prefix of whole escapes */
	cut = n / 2;
	part = malloc(cut + 1);
	check(part != NULL);
	check(mt_escape(part, cut + 1, raw, len, flags) <= cut &&
	      memcmp(part, e, strlen(part)) == 0);
	free(part);
	free(e);
}

/* A name from the trace: mixed, and escaped each way a command prints it. */
static void mix_name(uint64_t *h, const uint8_t *p, size_t n)
{
	mix_bytes(h, p, n);
	for (unsigned flags = 0; flags <= (MT_ESCAPE_CONTROL | MT_ESCAPE_QUOTE); flags++)
		check_escape(p, n, flags);
}

static void mix_str(uint64_t *h, const char *s)
{
	if (s)
		mix_bytes(h, (const uint8_t *)s, strlen(s));
}

static void mix_name_str(uint64_t *h, const char *s)
{
	if (s)
		mix_name(h, (const uint8_t *)s, strlen(s));
}

static void mix_error(uint64_t *h, const struct mt_error *err)
{
	mix(h, err->offset);
	/* the message must be a terminated string whatever went wrong */
	mix(h, strnlen(err->message, sizeof(err->message)) < sizeof(err->message));
}

static void mix_record(uint64_t *h, const struct mt_record *rec)
{
	mix(h, rec->type);
	mix(h, rec->offset);
	mix(h, rec->length);
	mix(h, rec->time);
	mix(h, rec->chunk->index ^ rec->chunk->instance ^ rec->chunk->tid);
	mix_str(h, mt_record_name(rec->type));
	mix(h, mt_record_is_event(rec->type));
	switch (rec->type) {
	case MT_REC_PROCESS:
		mix(h, rec->u.process.pid ^ rec->u.process.ppid ^ rec->u.process.origin);
		mix(h, rec->u.process.parent_instance ^ rec->u.process.realtime ^
		               rec->u.process.depth);
		mix_name(h, rec->u.process.exe.data, rec->u.process.exe.len);
		mix_name(h, rec->u.process.cmdline.data, rec->u.process.cmdline.len);
		break;
	case MT_REC_MODULE:
		mix(h, rec->u.module.base);
		mix_name(h, rec->u.module.path.data, rec->u.module.path.len);
		mix_bytes(h, rec->u.module.build_id.data, rec->u.module.build_id.len);
		mix(h, rec->u.module.nseg);
		for (uint32_t i = 0; i < rec->u.module.nseg; i++)
			mix(h, rec->u.module.seg[i].vaddr ^ rec->u.module.seg[i].memsz ^
			               rec->u.module.seg[i].flags);
		break;
	case MT_REC_MODULE_GONE:
		mix(h, rec->u.module_gone.base ^ rec->u.module_gone.gen);
		break;
	case MT_REC_STACK:
		mix(h, rec->u.stack.id ^ rec->u.stack.gen);
		for (uint32_t i = 0; i < rec->u.stack.n; i++)
			mix(h, rec->u.stack.frames[i]);
		mix(h, rec->u.stack.pystack);
		break;
	case MT_REC_PYSTACK:
		mix(h, rec->u.pystack.id ^ rec->u.pystack.n);
		for (uint32_t i = 0; i < rec->u.pystack.n; i++)
			mix(h, rec->u.pystack.frames[i].code ^ rec->u.pystack.frames[i].lasti ^
			               rec->u.pystack.frames[i].entry);
		break;
	case MT_REC_ALLOC:
		mix_str(h, mt_fn_name(rec->u.alloc.fn));
		mix_str(h, mt_kind_name((unsigned)rec->u.alloc.kind));
		mix(h, rec->u.alloc.addr ^ rec->u.alloc.size ^ rec->u.alloc.stack);
		mix(h, mt_block_key(rec->u.alloc.fn, rec->u.alloc.addr));
		break;
	case MT_REC_FREE:
		mix_str(h, mt_fn_name(rec->u.free.fn));
		mix_str(h, mt_kind_name((unsigned)rec->u.free.kind));
		mix(h, rec->u.free.addr);
		mix(h, mt_block_key(rec->u.free.fn, rec->u.free.addr));
		break;
	case MT_REC_REALLOC:
		mix_str(h, mt_fn_name(rec->u.realloc.fn));
		mix(h, rec->u.realloc.t0 ^ rec->u.realloc.old ^ rec->u.realloc.addr);
		mix(h, rec->u.realloc.size ^ rec->u.realloc.stack);
		break;
	case MT_REC_FAIL:
		mix_str(h, mt_fn_name(rec->u.fail.fn));
		mix_str(h, mt_kind_name((unsigned)rec->u.fail.kind));
		mix(h, rec->u.fail.size ^ rec->u.fail.stack ^ rec->u.fail.err);
		mix(h, rec->u.fail.device_free ^ rec->u.fail.device_total);
		break;
	case MT_REC_MMAP:
		mix_str(h, mt_fn_name(rec->u.mmap.fn));
		mix(h, rec->u.mmap.addr ^ rec->u.mmap.len ^ rec->u.mmap.prot);
		mix(h, rec->u.mmap.flags ^ rec->u.mmap.stack);
		break;
	case MT_REC_MUNMAP:
		mix(h, rec->u.munmap.addr ^ rec->u.munmap.len);
		break;
	case MT_REC_MREMAP:
		mix(h, rec->u.mremap.t0 ^ rec->u.mremap.old ^ rec->u.mremap.old_len);
		mix(h, rec->u.mremap.addr ^ rec->u.mremap.len ^ rec->u.mremap.stack);
		break;
	case MT_REC_SAMPLE:
		mix(h, rec->u.sample.ns ^ rec->u.sample.n);
		for (int i = 0; i < MT_SAMPLE_FIELD_COUNT; i++)
			mix(h, rec->u.sample.values[i]);
		break;
	case MT_REC_EXIT:
		mix(h, rec->u.exit.how ^ rec->u.exit.status ^ rec->u.exit.ns);
		break;
	case MT_REC_LOST:
		mix(h, rec->u.lost.reason ^ rec->u.lost.count);
		break;
	case MT_REC_MARK:
		mix_name(h, rec->u.mark.label.data, rec->u.mark.label.len);
		break;
	case MT_REC_PYCODE:
		mix(h, rec->u.pycode.id ^ rec->u.pycode.version ^ rec->u.pycode.first_line);
		mix_name(h, rec->u.pycode.file.data, rec->u.pycode.file.len);
		mix_name(h, rec->u.pycode.name.data, rec->u.pycode.name.len);
		mix_bytes(h, rec->u.pycode.linetable.data, rec->u.pycode.linetable.len);
		mix(h, rec->u.pycode.linetable_size);
		break;
	case MT_REC_REACH:
		mix_str(h, mt_reach_status_name(rec->u.reach.status));
		mix(h, rec->u.reach.time ^ rec->u.reach.detail ^ rec->u.reach.blocks);
		mix(h, rec->u.reach.bytes ^ rec->u.reach.scanned ^ rec->u.reach.ns);
		break;
	case MT_REC_REACH_BLOCKS: {
		/* the reader checked them: exactly n addresses come out */
		const uint8_t *pos = rec->u.reach_blocks.addrs;
		uint64_t addr = 0, n = 0;
		mix_str(h, mt_reach_class_name(rec->u.reach_blocks.cls));
		while (mt_reach_blocks_next(rec, &pos, &addr)) {
			mix(h, addr);
			n++;
		}
		check(n == rec->u.reach_blocks.n);
		break;
	}
	default:
		break;
	}
}

/* The reader alone, as `memtrace dump` uses it: every chunk, every record, fully decoded. */
static void walk_chunks(const struct mt_trace *t, uint64_t *h)
{
	uint64_t slots = mt_reader_chunk_slots(t);
	struct mt_record rec;
	struct mt_error err;

	for (uint64_t i = 0; i < slots; i++) {
		struct mt_cursor c;
		int r;

		memset(&err, 0, sizeof(err));
		r = mt_cursor_init(&c, t, i, &err);
		mix(h, (uint64_t)r);
		if (r < 0)
			mix_error(h, &err);
		if (r <= 0)
			continue;
		mix(h, c.chunk.pid ^ c.chunk.base_ticks ^ c.chunk.base_ns);
		while ((r = mt_cursor_next(&c, &rec, &err)) > 0)
			mix_record(h, &rec);
		if (r < 0)
			mix_error(h, &err);
	}
	/* one past the last slot is an error, never a read */
	if (mt_reader_chunk(t, slots, &(struct mt_chunk){0}, &err) >= 0)
		__builtin_trap();
}

struct ctx {
	uint64_t h;
	struct mt_replay *r;
	const struct mt_instance *in;
};

static void mix_stack(struct ctx *x, uint32_t instance, uint32_t id)
{
	const struct mt_pyframe *py;
	uint64_t frames[MT_MAX_DEPTH];
	uint32_t n, gen;

	if (mt_replay_stack(x->r, instance, id, frames, &n, &gen) < 0)
		return;
	mix(&x->h, gen);
	for (uint32_t i = 0; i < n; i++)
		mix(&x->h, frames[i]);
	check(mt_replay_pystack(x->r, instance, id, &py, &n) == 0);
	for (uint32_t i = 0; i < n; i++) {
		const struct mt_pycode *c = mt_replay_pycode(x->r, instance, py[i].code);
		mix(&x->h, py[i].code ^ py[i].lasti ^ py[i].entry);
		if (!c)
			continue;
		mix(&x->h, c->version ^ c->first_line ^ c->linetable_size);
		mix_name_str(&x->h, c->file);
		mix_name_str(&x->h, c->name);
		mix_bytes(&x->h, c->linetable, c->linetable_len);
		mix(&x->h, (uint64_t)mt_pyframe_line(c->version, (int64_t)c->first_line,
		                                     c->linetable, c->linetable_len, py[i].lasti));
	}
}

static int on_record(void *vctx, const struct mt_instance *in, const struct mt_record *rec)
{
	struct ctx *x = vctx;

	mix(&x->h, in->id);
	mix_record(&x->h, rec);
	mix(&x->h, mt_clock_ns(mt_replay_clock(x->r), rec->time));
	return 0;
}

static int on_block(void *vctx, const struct mt_block *b)
{
	struct ctx *x = vctx;

	mix(&x->h, b->addr ^ b->size);
	mix_str(&x->h, mt_kind_name(b->kind));
	mix_stack(x, b->stack_instance, b->stack);
	return 0;
}

static int on_stack(void *vctx, const struct mt_stack_stats *s)
{
	struct ctx *x = vctx;

	mix_str(&x->h, mt_kind_name(s->kind));
	mix(&x->h, s->allocations ^ s->bytes_allocated ^ s->live_bytes);
	mix(&x->h, s->live_blocks ^ s->peak_bytes ^ s->peak_blocks);
	mix_stack(x, s->stack_instance, s->stack);
	return 0;
}

static void mix_instance(struct ctx *x, const struct mt_instance *in)
{
	const struct mt_clock_fit *fit = mt_replay_clock(x->r);

	mix(&x->h, in->id ^ in->have_process ^ in->process_offset ^ in->pid ^ in->ppid);
	mix(&x->h, in->origin ^ in->parent_instance ^ in->depth ^ in->realtime);
	mix(&x->h, mt_clock_ns(fit, in->start_time) ^ mt_clock_ns(fit, in->end_time));
	mix_name_str(&x->h, in->exe);
	mix_name_str(&x->h, in->cmdline);
	mix(&x->h, in->end ^ in->exit_how ^ in->exit_status);
	mix(&x->h, in->records ^ in->events ^ in->chunks ^ in->threads);
	for (int k = 0; k < MT_KIND_COUNT; k++) {
		const struct mt_kind_stats *s = &in->kind[k];
		mix(&x->h, mt_kind_shown(in, (unsigned)k));
		mix(&x->h, s->allocations ^ s->frees ^ s->bytes_allocated ^ s->live_bytes);
		mix(&x->h, s->live_blocks ^ s->peak_bytes ^ s->peak_blocks);
		mix(&x->h, mt_clock_ns(fit, s->peak_time));
		mix(&x->h, s->failed ^ s->unknown_frees ^ s->inherited_bytes ^ s->inherited_blocks);
	}
	mix(&x->h, in->sample_count ^ mt_clock_ns(fit, in->sample_time));
	for (int i = 0; i < MT_SAMPLE_FIELD_COUNT; i++)
		mix(&x->h, in->sample[i]);
	mix(&x->h, in->lost_stack_events ^ (uint64_t)in->stopped_errno);
	for (uint32_t i = 0; i < in->nfails; i++) {
		const struct mt_fail_event *f = &in->fails[i];
		mix(&x->h, f->time ^ f->offset ^ f->fn ^ f->err ^ f->size);
		mix(&x->h, f->device_free ^ f->device_total);
		mix_str(&x->h, mt_kind_name(f->kind));
		mix_stack(x, in->id, f->stack);
	}
	for (uint32_t i = 0; i < in->nmodules; i++) {
		const struct mt_module *m = &in->modules[i];
		mix(&x->h, m->time ^ m->base ^ m->gone_time);
		mix_name_str(&x->h, m->path);
		mix_bytes(&x->h, m->build_id, m->build_id_len);
		for (uint32_t s = 0; s < m->nseg; s++)
			mix(&x->h, m->seg[s].vaddr ^ m->seg[s].memsz ^ m->seg[s].flags);
	}
	mix(&x->h, in->stack_count ^ in->replayed);
}

static int on_done(void *vctx, struct mt_replay *r, const struct mt_instance *in)
{
	struct ctx *x = vctx;
	int ret;

	mix_instance(x, in);
	ret = mt_replay_foreach_live(r, in, on_block, x);
	if (ret)
		return ret;
	return mt_replay_foreach_stack(r, in, on_stack, x);
}

static void replay(const struct mt_trace *t, uint64_t *h)
{
	static const struct mt_replay_callbacks cb = {.record = on_record,
	                                              .instance_done = on_done};
	struct ctx x = {.h = *h};
	const struct mt_trace_stats *st;
	struct mt_error err = {0};
	int r;

	r = mt_replay_open(&x.r, t, &err);
	mix(&x.h, (uint64_t)r);
	if (r < 0) {
		mix_error(&x.h, &err);
		*h = x.h;
		return;
	}
	st = mt_replay_trace_stats(x.r);
	mix(&x.h, st->chunks ^ st->unused_chunks ^ st->records ^ st->events ^ st->unknown_records);
	r = mt_replay_run(x.r, &cb, &x, &err);
	mix(&x.h, (uint64_t)r);
	if (r < 0)
		mix_error(&x.h, &err);
	/* what a report walks afterwards: every instance, replayed or not, and its stacks (none
	 * left: they go after instance_done) */
	for (uint32_t i = 0; i < mt_replay_instance_count(x.r); i++) {
		const struct mt_instance *in = mt_replay_instance(x.r, i);
		if (mt_replay_find_instance(x.r, in->id) != in)
			__builtin_trap();
		mix_instance(&x, in);
		if (in->replayed)
			mt_replay_foreach_stack(x.r, in, on_stack, &x);
	}
	mt_replay_free(x.r);
	*h = x.h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mt_trace t;
	struct mt_error err = {0};
	uint64_t h = 0;
	int r;

	r = mt_reader_open_memory(&t, data, size, &err);
	if (r < 0) {
		mix_error(&h, &err);
		sink = h;
		return 0;
	}
	mix(&h, t.header.version ^ t.header.chunk_unit ^ t.chunk_count ^ t.truncated);
	walk_chunks(&t, &h);
	replay(&t, &h);
	mt_reader_close(&t);
	sink = h;
	return 0;
}
