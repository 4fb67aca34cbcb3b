/* SPDX-License-Identifier: MIT */
/*
 * Event records: what the interposed functions write (docs/trace-format.md,
 * records 5 to 11 and 14).
 *
 * Context: hot path, guard set. The time is taken first, so that it is the
 * moment the real function returned (or, for frees, the moment before the
 * block is given back: the caller records before calling the real free).
 * May not: take a lock, allocate, change errno.
 */
#include "mt.h"

void mt_rec_alloc(unsigned fn, void *p, size_t size)
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
	q = mt_put_varint(q, size);
	q = mt_put_varint(q, stack);
	mt_commit_small(rec, MT_REC_ALLOC, q);
}

void mt_rec_free(unsigned fn, void *p)
{
	uint64_t now = mt_now_before();
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (MT_UNLIKELY(!rec))
		return;
	q = mt_put_time(rec + 2, now);
	*q++ = (uint8_t)fn;
	q = mt_put_addr(q, (uintptr_t)p);
	mt_commit_small(rec, MT_REC_FREE, q);
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

void mt_rec_fail(unsigned fn, size_t size, int err)
{
	uint64_t now = mt_now();
	uint32_t stack = mt_stack_current();
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);
	uint8_t *q;

	if (MT_UNLIKELY(!rec))
		return;
	q = mt_put_time(rec + 2, now);
	*q++ = (uint8_t)fn;
	q = mt_put_varint(q, size);
	q = mt_put_varint(q, stack);
	q = mt_put_varint(q, (uint64_t)err);
	mt_commit_small(rec, MT_REC_FAIL, q);
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
	uint64_t now = mt_now_before();
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
