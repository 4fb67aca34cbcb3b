/* SPDX-License-Identifier: MIT */
/*
 * Event records: what the interposed functions write (docs/trace-format.md,
 * records 5 to 11 and 14; the short records of malloc, 21 and 22, and of
 * free, 23, are inline in mt.h: mt_rec_short_malloc, mt_rec_short_free).
 *
 * Context: hot path, guard set. The time is taken first, so that it is the
 * moment the real function returned (or, for frees, the moment before the
 * block is given back: the caller records before calling the real free).
 * May not: take a lock, allocate, change errno.
 */
#include "mt.h"

/* A kind the function does not imply (the CUDA ones) is written as a trailing field. */
static void alloc_record(unsigned fn, unsigned kind, void *p, uint64_t size, uint32_t stack,
                         uint64_t now)
{
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (MT_UNLIKELY(!rec))
		return;
	q = mt_put_time(rec + 2, now);
	*q++ = (uint8_t)fn;
	q = mt_put_addr(q, (uintptr_t)p);
	q = mt_put_varint(q, size);
	q = mt_put_varint(q, stack);
	if (MT_UNLIKELY(kind != mt_fn_kind(fn)))
		q = mt_put_varint(q, kind);
	mt_commit_small(rec, MT_REC_ALLOC, q);
}

void mt_rec_alloc(unsigned fn, void *p, size_t size)
{
	uint64_t now = mt_now();
	uint32_t stack = mt_stack_current();

	alloc_record(fn, mt_fn_kind(fn), p, size, stack, now);
}

void mt_rec_alloc_kind(unsigned fn, unsigned kind, void *p, uint64_t size)
{
	uint64_t now = mt_now();

	alloc_record(fn, kind, p, size, mt_stack_current(), now);
}

void mt_rec_alloc_stack(unsigned fn, unsigned kind, void *p, uint64_t size, uint32_t stack)
{
	alloc_record(fn, kind, p, size, stack, mt_now());
}

static void free_record(unsigned fn, unsigned kind, void *p)
{
	uint64_t now = mt_now();
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (MT_UNLIKELY(!rec))
		return;
	q = mt_put_time(rec + 2, now);
	*q++ = (uint8_t)fn;
	q = mt_put_addr(q, (uintptr_t)p);
	if (MT_UNLIKELY(kind != mt_fn_kind(fn)))
		q = mt_put_varint(q, kind);
	mt_commit_small(rec, MT_REC_FREE, q);
}

void mt_rec_free_kind(unsigned fn, unsigned kind, void *p)
{
	free_record(fn, kind, p);
}

void mt_rec_realloc(unsigned fn, uint64_t t0, void *old, void *p, size_t size)
{
	uint64_t now = mt_now();
	uint32_t stack = mt_stack_current();
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (MT_UNLIKELY(!rec))
		return;
	q = mt_put_time(rec + 2, now);
	q = mt_put_varint(q, now - t0);
	*q++ = (uint8_t)fn;
	q = mt_put_addr(q, (uintptr_t)old);
	q = mt_put_addr(q, (uintptr_t)p);
	q = mt_put_varint(q, size);
	q = mt_put_varint(q, stack);
	mt_commit_small(rec, MT_REC_REALLOC, q);
}

/* A CUDA failure adds its kind and the device's free and total bytes. */
static void fail_record(unsigned fn, unsigned kind, uint64_t size, int err, uint64_t device_free,
                        uint64_t device_total, uint32_t stack, uint64_t now)
{
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (MT_UNLIKELY(!rec))
		return;
	q = mt_put_time(rec + 2, now);
	*q++ = (uint8_t)fn;
	q = mt_put_varint(q, size);
	q = mt_put_varint(q, stack);
	q = mt_put_varint(q, (uint64_t)(uint32_t)err);
	if (kind != mt_fn_kind(fn)) {
		q = mt_put_varint(q, kind);
		q = mt_put_varint(q, device_free);
		q = mt_put_varint(q, device_total);
	}
	mt_commit_small(rec, MT_REC_FAIL, q);
}

void mt_rec_fail(unsigned fn, size_t size, int err)
{
	uint64_t now = mt_now();

	fail_record(fn, mt_fn_kind(fn), size, err, 0, 0, mt_stack_current(), now);
}

void mt_rec_fail_kind(unsigned fn, unsigned kind, uint64_t size, int err, uint64_t device_free,
                      uint64_t device_total)
{
	uint64_t now = mt_now();

	fail_record(fn, kind, size, err, device_free, device_total, mt_stack_current(), now);
}

void mt_rec_fail_stack(unsigned fn, unsigned kind, uint64_t size, int err, uint64_t device_free,
                       uint64_t device_total, uint32_t stack)
{
	fail_record(fn, kind, size, err, device_free, device_total, stack, mt_now());
}

void mt_rec_mmap(unsigned fn, void *p, size_t len, int prot, int flags)
{
	uint64_t now = mt_now();
	uint32_t stack = mt_stack_current();
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (MT_UNLIKELY(!rec))
		return;
	q = mt_put_time(rec + 2, now);
	*q++ = (uint8_t)fn;
	q = mt_put_addr(q, (uintptr_t)p);
	q = mt_put_varint(q, len);
	q = mt_put_varint(q, (uint32_t)prot);
	q = mt_put_varint(q, (uint32_t)flags);
	q = mt_put_varint(q, stack);
	mt_commit_small(rec, MT_REC_MMAP, q);
}

void mt_rec_munmap(void *p, size_t len)
{
	uint64_t now = mt_now();
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (MT_UNLIKELY(!rec))
		return;
	q = mt_put_time(rec + 2, now);
	q = mt_put_addr(q, (uintptr_t)p);
	q = mt_put_varint(q, len);
	mt_commit_small(rec, MT_REC_MUNMAP, q);
}

void mt_rec_mremap(uint64_t t0, void *old, size_t old_len, void *p, size_t len)
{
	uint64_t now = mt_now();
	uint32_t stack = mt_stack_current();
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (MT_UNLIKELY(!rec))
		return;
	q = mt_put_time(rec + 2, now);
	q = mt_put_varint(q, now - t0);
	q = mt_put_addr(q, (uintptr_t)old);
	q = mt_put_varint(q, old_len);
	q = mt_put_addr(q, (uintptr_t)p);
	q = mt_put_varint(q, len);
	q = mt_put_varint(q, stack);
	mt_commit_small(rec, MT_REC_MREMAP, q);
}

void mt_rec_lost(unsigned reason, uint64_t count)
{
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (!rec)
		return;
	q = mt_put_varint(rec + 2, reason);
	q = mt_put_varint(q, count);
	mt_commit_small(rec, MT_REC_LOST, q);
}
