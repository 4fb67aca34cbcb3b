/* SPDX-License-Identifier: MIT */
/*
 * A lock-free single-producer/single-consumer ring of block pointers, so that
 * bench-threads can free on one thread what another allocated. The producer
 * never waits: a full ring is reported and the caller frees the block itself.
 *
 * May not: allocate, or be used by more than one producer or one consumer.
 */
#ifndef BENCH_SPSC_H
#define BENCH_SPSC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define SPSC_SLOTS 1024 /* a power of two, so the free-running indices wrap cleanly */

/*
 * head and tail are free-running counters on their own cache lines, so the
 * two threads do not bounce one line on every push and pop.
 *
 *   producer                              consumer
 *   write the block; slot[h] = p          h = load_acquire(head)        (B)
 *   store_release(head, h + 1)     (A)    p = slot[t]
 *   ...                                   store_release(tail, t + 1)    (C)
 *   t = load_acquire(tail)         (D)    read the block; free it
 *
 * (A)-(B): the consumer sees the slot and the bytes the producer wrote into
 * the block. (C)-(D): the producer overwrites a slot only after the consumer
 * has read it. The block itself is the consumer's once popped, so reading it
 * after (C) is fine.
 */
struct spsc {
	_Alignas(64) _Atomic size_t head; /* written by the producer only */
	_Alignas(64) _Atomic size_t tail; /* written by the consumer only */
	_Alignas(64) _Atomic bool done;   /* the producer will push no more */
	void *slot[SPSC_SLOTS];
};

static inline bool spsc_push(struct spsc *r, void *p)
{
	size_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	size_t t = atomic_load_explicit(&r->tail, memory_order_acquire); /* (D) pairs with (C) */

	if (h - t == SPSC_SLOTS)
		return false;
	r->slot[h % SPSC_SLOTS] = p;
	atomic_store_explicit(&r->head, h + 1, memory_order_release); /* (A) pairs with (B) */
	return true;
}

static inline void *spsc_pop(struct spsc *r)
{
	size_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	size_t h = atomic_load_explicit(&r->head, memory_order_acquire); /* (B) pairs with (A) */
	void *p;

	if (t == h)
		return NULL;
	p = r->slot[t % SPSC_SLOTS];
	atomic_store_explicit(&r->tail, t + 1, memory_order_release); /* (C) pairs with (D) */
	return p;
}

#endif
