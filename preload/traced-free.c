/* SPDX-License-Identifier: MIT */
/*
 * The interposed free's traced half, which pass.c's free jumps to when its
 * pass does not let the call through: recorded before the block is given
 * back, so that in the trace an address is never handed out again before
 * its free (hooks.c says more).
 *
 * Built without frame pointers, as pass.c is: free walks no stack, and full
 * capture's way here (mt_plain) keeps nothing in saved registers, so a frame
 * pointer would be most of its frame.
 *
 * Context: hot path, any thread, any time from the loader's first malloc to
 * the last free of exit.
 * May not: change errno (the real free does not either), or give the block
 * back before its record is written.
 */
#include "mt.h"

/*
 * free in sampled mode: recorded when p's allocation was (as mt_sample_forget
 * says). The real free under the guard even when p's home is empty (the
 * pass closed, or emptied since free's test): see pass.c's pass_enter.
 */
static __attribute__((noinline)) void sampled_free(void *p)
{
	if (!mt_enter()) {
		mt_real.free(p);
		return;
	}
	if (mt_sample_forget(p))
		mt_rec_short_free(p, mt_now());
	mt_real.free(p);
	mt_leave_hot();
}

/* mt_traced_free where mt_plain does not hold; tests sampled mode once. */
static __attribute__((noinline)) void traced_free_any(void *p)
{
	if (MT_UNLIKELY(!mt_real.free))
		mt_real_resolve();
	if (MT_UNLIKELY(mt_config.sampling)) {
		sampled_free(p);
		return;
	}
	if (!mt_enter()) {
		mt_real.free(p);
		return;
	}
	mt_rec_short_free(p, mt_now());
	mt_real.free(p);
	mt_leave_hot();
}

/* mt_traced_free's record where the chunk is short of room (a new chunk): the guard held. */
static __attribute__((noinline)) void free_recorded(void *p, uint64_t now)
{
	mt_rec_short_free(p, now);
	mt_real.free(p);
	mt_leave_hot();
}

/*
 * Full capture with the TSC (mt_plain) tests none of the real function,
 * sampled mode, the clock, and its way makes no call before the real free's
 * (what would make one jumps elsewhere: traced_free_any, free_recorded), so
 * that it keeps nothing in saved registers.
 */
void mt_traced_free(void *p)
{
	struct mt_thread *t = &mt_self;
	uint64_t now;

	if (MT_UNLIKELY(!p || mt_bootstrap_owns(p)))
		return;
	if (MT_UNLIKELY(!mt_plain) ||
	    MT_UNLIKELY(atomic_load_explicit(&mt_state, memory_order_relaxed) != MT_ON) ||
	    MT_UNLIKELY(t->guard)) {
		traced_free_any(p);
		return;
	}
	t->guard = true;
	now = mt_now_plain();
	if (MT_UNLIKELY((size_t)(t->end - t->pos) < MT_HOT_RECORD_MAX)) {
		free_recorded(p, now);
		return;
	}
	if (!t->pos) /* as in mt_room: NULL only with end */
		__builtin_unreachable();
	mt_put_short_free(t->pos, p, now);
	mt_real.free(p);
	mt_leave_hot();
}
