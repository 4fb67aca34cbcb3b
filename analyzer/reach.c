/* SPDX-License-Identifier: MIT */
/*
 * Leak classes from the exit's scan (see reach.h).
 *
 * May not: print.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "reach.h"

const char *mt_leak_class_name(enum mt_leak_class c)
{
	static const char *const names[MT_LEAK_CLASS_COUNT] = {
	        [MT_LEAK_DEFINITE] = "definite",         [MT_LEAK_INDIRECT] = "indirect",
	        [MT_LEAK_POSSIBLE] = "possible",         [MT_LEAK_REACHABLE] = "reachable",
	        [MT_LEAK_UNCLASSIFIED] = "unclassified",
	};

	return c < MT_LEAK_CLASS_COUNT ? names[c] : "unknown";
}

void mt_reach_init(struct mt_reach *r)
{
	memset(r, 0, sizeof(*r));
	mt_map_init(&r->classes, sizeof(uint8_t));
	mt_map_init(&r->by_stack, sizeof(struct mt_leak_count[MT_LEAK_CLASS_COUNT]));
}

void mt_reach_free(struct mt_reach *r)
{
	mt_map_free(&r->classes);
	mt_map_free(&r->by_stack);
	mt_reach_init(r);
}

/* A host block made at `time` at addr: after the scan, not the block it saw there. */
static void made(struct mt_reach *r, uint64_t time, uint64_t addr)
{
	if (r->scan.seen && time > r->scan.time && addr)
		mt_map_del(&r->classes, addr);
}

int mt_reach_note(struct mt_reach *r, const struct mt_record *rec)
{
	const uint8_t *pos;
	uint64_t addr = 0;
	bool created;

	switch (rec->type) {
	case MT_REC_REACH:
		r->scan = (struct mt_reach_scan){
		        .seen = true,
		        .time = rec->u.reach.time,
		        .status = rec->u.reach.status,
		        .detail = rec->u.reach.detail,
		        .blocks = rec->u.reach.blocks,
		        .bytes = rec->u.reach.bytes,
		        .scanned = rec->u.reach.scanned,
		        .ns = rec->u.reach.ns,
		        .chunks = rec->u.reach.chunks,
		};
		return 0;
	case MT_REC_REACH_BLOCKS:
		pos = rec->u.reach_blocks.addrs;
		while (mt_reach_blocks_next(rec, &pos, &addr)) {
			uint8_t *c = mt_map_put(&r->classes, addr, &created);
			if (!c)
				return -ENOMEM;
			*c = (uint8_t)rec->u.reach_blocks.cls;
		}
		return 0;
	case MT_REC_ALLOC:
		if (rec->u.alloc.kind == MT_KIND_HOST)
			made(r, rec->time, rec->u.alloc.addr);
		return 0;
	case MT_REC_REALLOC:
		made(r, rec->time, rec->u.realloc.addr);
		return 0;
	default:
		return 0;
	}
}

static enum mt_leak_class class_of(const struct mt_reach *r, uint64_t addr)
{
	const uint8_t *c = mt_map_get(&r->classes, addr);

	switch (c ? *c : 0) {
	case MT_REACH_DEFINITE:
		return MT_LEAK_DEFINITE;
	case MT_REACH_INDIRECT:
		return MT_LEAK_INDIRECT;
	case MT_REACH_POSSIBLE:
		return MT_LEAK_POSSIBLE;
	case MT_REACH_REACHABLE:
		return MT_LEAK_REACHABLE;
	default:
		return MT_LEAK_UNCLASSIFIED;
	}
}

static int classify(void *ctx, const struct mt_block *b)
{
	struct mt_reach *r = ctx;
	enum mt_leak_class c;
	struct mt_leak_count *s;
	bool created;

	if (b->kind != MT_KIND_HOST)
		return 0;
	c = class_of(r, b->addr);
	r->total[c].bytes += b->size;
	r->total[c].blocks += b->blocks;
	s = mt_map_put(&r->by_stack, (uint64_t)b->stack_instance << 32 | b->stack, &created);
	if (!s)
		return -ENOMEM;
	s[c].bytes += b->size;
	s[c].blocks += b->blocks;
	return 0;
}

int mt_reach_finish(struct mt_reach *r, struct mt_replay *rp, const struct mt_instance *in)
{
	return mt_replay_foreach_live(rp, in, classify, r);
}

const struct mt_leak_count *mt_reach_stack(const struct mt_reach *r, uint32_t stack_instance,
                                           uint32_t stack)
{
	return mt_map_get(&r->by_stack, (uint64_t)stack_instance << 32 | stack);
}

/* Why a process that wrote no REACH has none. */
static const char *no_scan(const struct mt_instance *in)
{
	switch (in->end) {
	case MT_END_KILLED:
		return "killed";
	case MT_END_EXIT:
		return in->exit_how == MT_EXIT_UNDERSCORE ? "_exit: no exit handler ran"
		                                          : "no scan in the trace";
	case MT_END_STOPPED:
		return "tracing stopped";
	case MT_END_RUNNING:
		return "still running";
	case MT_END_CUT:
		return "the trace was cut";
	default:
		return "no scan in the trace";
	}
}

const char *mt_reach_missing(const struct mt_instance *in, const struct mt_reach_scan *s,
                             enum mt_kind k, char *buf, size_t size)
{
	if (k >= MT_KIND_CUDA_DEVICE)
		return "not a malloc-family kind: device pointers are not scanned";
	if (k != MT_KIND_HOST)
		return "not a malloc-family kind: only malloc's blocks are classified";
	if (mt_end_replaced(in->end))
		return "exec: the kernel dropped the heap, nothing leaked";
	if (!s->seen)
		return no_scan(in);
	switch (s->status) {
	case MT_REACH_DONE:
		return NULL;
	case MT_REACH_OFF:
		return in->sampling ? "off in sampled mode: the scan needs every live block"
		                    : "turned off (MEMTRACE_REACHABILITY=0)";
	case MT_REACH_NO_MEMORY:
		snprintf(buf, size, "not enough memory for the scan: %" PRIu64 " bytes", s->detail);
		return buf;
	case MT_REACH_FAILED:
		if (s->detail < 256)
			snprintf(buf, size, "the scan failed: signal %" PRIu64, s->detail);
		else
			snprintf(buf, size, "the scan failed: exit code %" PRIu64, s->detail - 256);
		return buf;
	case MT_REACH_NO_TRACE:
		snprintf(buf, size, "the scan could not read the trace back: %s",
		         s->detail && s->detail < 4096 ? strerror((int)s->detail)
		                                       : "unknown error");
		return buf;
	case MT_REACH_TOO_MANY:
		snprintf(buf, size, "too many live blocks for the scan: %" PRIu64, s->detail);
		return buf;
	case MT_REACH_TIMEOUT:
		snprintf(buf, size,
		         "the scan ran out of time: %" PRIu64 " ms (MEMTRACE_REACHABILITY_MS)",
		         s->detail);
		return buf;
	default:
		snprintf(buf, size, "a scan status this memtrace does not know: %" PRIu64,
		         s->status);
		return buf;
	}
}
