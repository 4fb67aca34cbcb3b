/* SPDX-License-Identifier: MIT */
/*
 * The exported malloc family, and sampled mode's pass in it
 * (docs/sampling.md): a call whose block is not to be recorded goes straight
 * to the real function, counted down (mt_pass_fits, mt_pass_count) or looked
 * up (a free's home, mt_home_empty); any other jumps to its traced half in
 * hooks.c. Full capture pays one compare of mt_pass_limit and the jump.
 *
 * This file is built without frame pointers: the pass has no use for one,
 * and it cost two of the malloc pass's 19 instructions. The traced halves
 * and the failure's record (mt_pass_failed) are reached by tail calls, so
 * they find the program's return address and frame pointer at their entry.
 *
 * Context: hot path, any thread, any time from the loader's first malloc to
 * the last free of exit.
 * May not: change what the real function returns or leaves in errno; touch
 * errno on the pass (a call that fails is recorded out of line), or do more
 * there than count down and hold the guard around the real call.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>

#include "mt.h"

/*
 * The real call of a pass holds the guard, as a traced half's does: a
 * signal handler that interrupts glibc there (maybe under its arena lock)
 * and calls _exit or exit must know it did (process.c: no heap figures,
 * which would wait for that lock for ever). The pass is taken only with the
 * guard clear (mt_pass_fits, and free's own test), so clear is what it
 * leaves.
 */
static inline void pass_enter(void)
{
	mt_self.guard = true;
}

static inline void pass_leave(void)
{
	mt_self.guard = false;
}

static inline size_t product(size_t a, size_t b)
{
	size_t r;

	return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

MT_EXPORT void *malloc(size_t size)
{
	if (mt_pass_open(size) && !mt_heap_asked() && mt_pass_fits(size)) {
		mt_pass_count(size);
		pass_enter();
		void *p = mt_real.malloc(size);
		pass_leave();
		if (MT_UNLIKELY(!p))
			return mt_pass_failed(MT_FN_MALLOC, size, errno);
		return p;
	}
	return mt_traced_malloc(size);
}

/* The one test of a free that was not sampled: its home holds no recorded block. */
MT_EXPORT void free(void *p)
{
	if (MT_LIKELY(mt_pass_limit) && mt_home_empty(p) && !mt_self.guard) {
		pass_enter();
		mt_real.free(p);
		pass_leave();
		return;
	}
	mt_traced_free(p);
}

/* The product only once the pass is open: full capture's calloc costs what malloc's does. */
MT_EXPORT void *calloc(size_t n, size_t size)
{
	size_t total;

	if (MT_LIKELY(mt_pass_limit) && mt_pass_open(total = product(n, size)) &&
	    !mt_heap_asked() && mt_pass_fits(total)) {
		mt_pass_count(total);
		pass_enter();
		void *p = mt_real.calloc(n, size);
		pass_leave();
		if (MT_UNLIKELY(!p))
			return mt_pass_failed(MT_FN_CALLOC, total, errno);
		return p;
	}
	return mt_traced_calloc(n, size);
}

/*
 * realloc passes when the old block was not sampled (its free would not be
 * recorded) and the new one is not (its size counted down in full): neither
 * half recorded, and a realloc with neither half recorded writes nothing.
 * NULL and 0 as in hooks.c: realloc(p, 0) that frees p returns NULL and took
 * no byte.
 */
MT_EXPORT void *realloc(void *old, size_t size)
{
	if (mt_pass_open(size) && mt_home_empty(old) && mt_pass_fits(size)) {
		mt_pass_count(size);
		pass_enter();
		void *p = mt_real.realloc(old, size);
		pass_leave();
		if (MT_UNLIKELY(!p) && (!old || size))
			return mt_pass_failed(MT_FN_REALLOC, size, errno);
		return p;
	}
	return mt_traced_realloc(old, size);
}

MT_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	size_t total;

	if (MT_LIKELY(mt_pass_limit) && mt_pass_open(total = product(n, size)) &&
	    mt_home_empty(old) && mt_pass_fits(total)) {
		mt_pass_count(total);
		pass_enter();
		void *p = mt_real.reallocarray(old, n, size);
		pass_leave();
		if (MT_UNLIKELY(!p) && (!old || total))
			return mt_pass_failed(MT_FN_REALLOCARRAY, total, errno);
		return p;
	}
	return mt_traced_reallocarray(old, n, size);
}

MT_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (mt_pass_open(size) && mt_pass_fits(size)) {
		mt_pass_count(size); /* torch's CPU tensors come this way */
		pass_enter();
		int r = mt_real.posix_memalign(out, align, size);
		pass_leave();
		if (MT_UNLIKELY(r))
			return mt_pass_failed_r(MT_FN_POSIX_MEMALIGN, size, r);
		return 0;
	}
	return mt_traced_posix_memalign(out, align, size);
}

MT_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (mt_pass_open(size) && mt_pass_fits(size)) {
		mt_pass_count(size);
		pass_enter();
		void *p = mt_real.aligned_alloc(align, size);
		pass_leave();
		if (MT_UNLIKELY(!p))
			return mt_pass_failed(MT_FN_ALIGNED_ALLOC, size, errno);
		return p;
	}
	return mt_traced_aligned_alloc(align, size);
}

MT_EXPORT void *memalign(size_t align, size_t size)
{
	if (mt_pass_open(size) && mt_pass_fits(size)) {
		mt_pass_count(size);
		pass_enter();
		void *p = mt_real.memalign(align, size);
		pass_leave();
		if (MT_UNLIKELY(!p))
			return mt_pass_failed(MT_FN_MEMALIGN, size, errno);
		return p;
	}
	return mt_traced_memalign(align, size);
}
