/* SPDX-License-Identifier: MIT */
/*
 * The interposed allocation functions. Each is the same short path: call the
 * real function, then, unless this thread is already inside memtrace (the
 * guard) or tracing is off, record the event (in sampled mode, if its block
 * is sampled: mt_sample_take, mt_sample_forget). Frees are recorded before the
 * block is given back, allocations after they return, so that in the trace
 * an address is never handed out again before its free. The malloc family's
 * exported functions are in pass.c, with sampled mode's pass; here are the
 * traced halves they jump to (mt_traced_*), but free's (traced-free.c).
 *
 * Context: hot path, any thread, any time from the loader's first malloc to
 * the last free of exit.
 * May not: change what the real function returns or leaves in errno.
 */
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mt.h"

static size_t product(size_t a, size_t b)
{
	size_t r;

	return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

/*
 * A call that the pass (pass.c) let through failed: recorded as every
 * failure is (the countdown given back its bytes, nothing was allocated).
 * The exported function jumps here (a tail call), so the return address and
 * frame pointer found here are the program's.
 */
static __attribute__((noinline)) void pass_failed_at(unsigned fn, size_t size, int error,
                                                     uintptr_t ip, uintptr_t sp, uintptr_t bp)
{
	if (!mt_enter())
		return;
	int err = errno;
	mt_self.sample_left += (int64_t)size;
	mt_self.caller_ip = ip;
	mt_self.caller_sp = sp;
	mt_self.caller_bp = bp;
	mt_rec_fail(fn, size, error);
	mt_leave(err);
}

#define PASS_FAILED(fn, size, error)                                                               \
	do {                                                                                       \
		uintptr_t ip_, sp_, bp_;                                                           \
		MT_CALLER_REGS(ip_, sp_, bp_);                                                     \
		pass_failed_at(fn, size, error, ip_, sp_, bp_);                                    \
	} while (0)

void *mt_pass_failed(unsigned fn, size_t size, int error)
{
	PASS_FAILED(fn, size, error);
	return NULL;
}

int mt_pass_failed_r(unsigned fn, size_t size, int error)
{
	PASS_FAILED(fn, size, error);
	return error;
}

/*
 * The traced halves of the interposed allocation functions, which pass.c's
 * exported ones jump to when the pass does not let the call through. A jump
 * (a tail call at -O2) leaves no frame of the exported function behind, so
 * that MT_MARK_CALLER here still sees the program's call (were it a call,
 * the stack would begin with memtrace's own frame, which the analyzer leaves
 * out: frames.c).
 *
 * The first call of the process looks the real functions up. A call that
 * comes while that is under way (dlsym's own calloc) finds them still
 * unknown and is served from the bootstrap arena.
 */
static __attribute__((noinline)) void *traced_malloc_any(size_t size)
{
	void *p;

	if (MT_UNLIKELY(!mt_real.malloc)) {
		mt_real_resolve();
		if (!mt_real.malloc)
			return mt_bootstrap_alloc(size);
	}
	if (!mt_enter())
		return mt_real.malloc(size);
	MT_MARK_CALLER();
	p = mt_real.malloc(size);
	if (MT_LIKELY(p)) {
		if (mt_sample_take(p, size))
			mt_rec_short_malloc(p, size, mt_now());
		mt_leave_hot();
	} else {
		int err = errno;
		mt_rec_fail(MT_FN_MALLOC, size, err);
		mt_leave(err);
	}
	return p;
}

/* mt_traced_malloc's failure (p NULL): recorded, errno kept. */
static __attribute__((noinline)) void *malloc_failed(size_t size)
{
	int err = errno;

	mt_rec_fail(MT_FN_MALLOC, size, err);
	mt_leave(err);
	return NULL;
}

/* mt_traced_malloc's record where the chunk is short of room (a new chunk). */
static __attribute__((noinline)) void *malloc_recorded(void *p, size_t size, uint64_t now,
                                                       uint32_t stack)
{
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);

	if (rec)
		mt_put_short_malloc(rec, p, size, now, stack);
	mt_leave_hot();
	return p;
}

/*
 * Full capture with the TSC (mt_plain) takes the way below, with no test of
 * the real function, sampled mode or the clock; any other case jumps to
 * traced_malloc_any (a tail call, as pass.c's to here: its MT_MARK_CALLER
 * sees the program's call). Its time is taken after the stack's id, and
 * what would make a call after that (a new chunk) or before it (a failure)
 * jumps elsewhere, so that the way keeps only size and p in saved registers.
 */
void *mt_traced_malloc(size_t size)
{
	struct mt_thread *t;
	uint32_t stack;
	uint64_t now;
	void *p;

	if (MT_UNLIKELY(!mt_plain))
		return traced_malloc_any(size);
	if (!mt_enter())
		return mt_real.malloc(size);
	MT_MARK_CALLER();
	p = mt_real.malloc(size);
	if (MT_UNLIKELY(!p))
		return malloc_failed(size);
	stack = mt_stack_current();
	now = mt_now_plain();
	t = &mt_self;
	if (MT_UNLIKELY((size_t)(t->end - t->pos) < MT_HOT_RECORD_MAX))
		return malloc_recorded(p, size, now, stack);
	if (!t->pos) /* as in mt_room: NULL only with end */
		__builtin_unreachable();
	mt_put_short_malloc(t->pos, p, size, now, stack);
	mt_leave_hot();
	return p;
}

void *mt_traced_calloc(size_t n, size_t size)
{
	void *p;

	if (MT_UNLIKELY(!mt_real.calloc)) {
		mt_real_resolve();
		if (!mt_real.calloc)
			return mt_bootstrap_alloc(product(n, size));
	}
	if (!mt_enter())
		return mt_real.calloc(n, size);
	MT_MARK_CALLER();
	p = mt_real.calloc(n, size);
	if (MT_LIKELY(p)) {
		if (mt_sample_take(p, n * size))
			mt_rec_alloc(MT_FN_CALLOC, p, n * size);
		mt_leave_hot();
	} else {
		int err = errno;
		mt_rec_fail(MT_FN_CALLOC, product(n, size), err);
		mt_leave(err);
	}
	return p;
}

/* realloc of a bootstrap block: move it to the real heap (never seen in practice). */
static void *from_bootstrap(void *old, size_t size)
{
	void *p = malloc(size);

	if (p)
		memcpy(p, old, size);
	return p;
}

static inline __attribute__((always_inline)) void *realloc_common(unsigned fn, void *old, size_t n,
                                                                  size_t size)
{
	size_t total = fn == MT_FN_REALLOCARRAY ? product(n, size) : size;
	uint64_t t0;
	void *p;

	if (MT_UNLIKELY(mt_bootstrap_owns(old)))
		return total == SIZE_MAX ? NULL : from_bootstrap(old, total);
	if (MT_UNLIKELY(!mt_real.realloc))
		mt_real_resolve();
	if (!mt_enter())
		return fn == MT_FN_REALLOCARRAY ? mt_real.reallocarray(old, n, size)
		                                : mt_real.realloc(old, size);
	MT_MARK_CALLER();
	/* sampled mode: out of the set before realloc can give the address to another thread */
	bool was = old && mt_sample_forget(old);
	t0 = mt_now();
	p = fn == MT_FN_REALLOCARRAY ? mt_real.reallocarray(old, n, size)
	                             : mt_real.realloc(old, size);
	if (p || (old && total == 0)) {
		/* each half recorded as its block was sampled; nothing when neither was */
		bool now = p && mt_sample_take(p, total);
		if (was || now)
			mt_rec_realloc(fn, t0, was ? old : NULL, now ? p : NULL, total);
		mt_leave_kept();
		return p;
	}
	int err = errno;
	if (was && mt_config.sampling) /* failed: the old block stays, and stays sampled */
		mt_sample_keep(old);
	mt_rec_fail(fn, total, err);
	mt_leave(err);
	return p;
}

void *mt_traced_realloc(void *old, size_t size)
{
	return realloc_common(MT_FN_REALLOC, old, 1, size);
}

void *mt_traced_reallocarray(void *old, size_t n, size_t size)
{
	return realloc_common(MT_FN_REALLOCARRAY, old, n, size);
}

int mt_traced_posix_memalign(void **out, size_t align, size_t size)
{
	int r;

	if (MT_UNLIKELY(!mt_real.posix_memalign))
		mt_real_resolve();
	if (!mt_enter())
		return mt_real.posix_memalign(out, align, size);
	MT_MARK_CALLER();
	r = mt_real.posix_memalign(out, align, size);
	if (r == 0) {
		if (mt_sample_take(*out, size))
			mt_rec_alloc(MT_FN_POSIX_MEMALIGN, *out, size);
		mt_leave_kept();
		return 0;
	}
	int err = errno;
	mt_rec_fail(MT_FN_POSIX_MEMALIGN, size, r);
	mt_leave(err);
	return r;
}

/* The malloc-shaped aligned allocators differ only in the real function. */
static inline __attribute__((always_inline)) void *aligned_common(unsigned fn,
                                                                  void *(*real)(size_t, size_t),
                                                                  size_t align, size_t size,
                                                                  size_t recorded)
{
	void *p;

	if (!mt_enter())
		return real(align, size);
	MT_MARK_CALLER();
	p = real(align, size);
	if (p) {
		if (mt_sample_take(p, recorded))
			mt_rec_alloc(fn, p, recorded);
		mt_leave_kept();
		return p;
	}
	int err = errno;
	mt_rec_fail(fn, recorded, err);
	mt_leave(err);
	return p;
}

static void *valloc_real(size_t align, size_t size)
{
	(void)align;
	return mt_real.valloc(size);
}

static void *pvalloc_real(size_t align, size_t size)
{
	(void)align;
	return mt_real.pvalloc(size);
}

void *mt_traced_aligned_alloc(size_t align, size_t size)
{
	if (MT_UNLIKELY(!mt_real.aligned_alloc))
		mt_real_resolve();
	return aligned_common(MT_FN_ALIGNED_ALLOC, mt_real.aligned_alloc, align, size, size);
}

void *mt_traced_memalign(size_t align, size_t size)
{
	if (MT_UNLIKELY(!mt_real.memalign))
		mt_real_resolve();
	return aligned_common(MT_FN_MEMALIGN, mt_real.memalign, align, size, size);
}

MT_EXPORT void *valloc(size_t size)
{
	mt_real_resolve();
	return aligned_common(MT_FN_VALLOC, valloc_real, 0, size, size);
}

/* pvalloc hands out whole pages; the program may use all of them. */
MT_EXPORT void *pvalloc(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t rounded = size > SIZE_MAX - page ? SIZE_MAX : (size + page - 1) / page * page;

	mt_real_resolve();
	return aligned_common(MT_FN_PVALLOC, pvalloc_real, 0, size, rounded ? rounded : page);
}

MT_EXPORT size_t malloc_usable_size(void *p)
{
	if (!p || mt_bootstrap_owns(p))
		return 0;
	mt_real_resolve();
	return mt_real.malloc_usable_size(p);
}

/* ---- anonymous mappings ---- */

static inline __attribute__((always_inline)) void *
mmap_common(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t len, int prot,
            int flags, int fd, off_t off)
{
	void *p;

	if (MT_UNLIKELY(!real))
		return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (!(flags & MAP_ANONYMOUS) || !mt_config.trace_mmap || !mt_enter())
		return real(addr, len, prot, flags, fd, off);
	MT_MARK_CALLER();
	p = real(addr, len, prot, flags, fd, off);
	int err = errno;
	if (p != MAP_FAILED)
		mt_rec_mmap(MT_FN_MMAP, p, len, prot, flags);
	else
		mt_rec_fail(MT_FN_MMAP, len, err);
	mt_leave(err);
	return p;
}

MT_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap_common(mt_real.mmap, addr, len, prot, flags, fd, off);
}

MT_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap_common(mt_real.mmap64, addr, len, prot, flags, fd, off);
}

MT_EXPORT int munmap(void *addr, size_t len)
{
	if (MT_UNLIKELY(!mt_real.munmap))
		return (int)syscall(SYS_munmap, addr, len);
	if (MT_UNLIKELY(mt_python_on))
		mt_python_forget((uintptr_t)addr, len);
	if (!mt_config.trace_mmap || !mt_enter())
		return mt_real.munmap(addr, len);
	int err = errno;
	mt_rec_munmap(addr, len);
	int r = mt_real.munmap(addr, len);
	err = r < 0 ? errno : err;
	mt_leave(err);
	return r;
}

MT_EXPORT void *mremap(void *old, size_t old_len, size_t len, int flags, ...)
{
	void *want = NULL, *p;
	uint64_t t0;
	va_list ap;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	if (MT_UNLIKELY(!mt_real.mremap))
		return (void *)syscall(SYS_mremap, old, old_len, len, flags, want);
	if (MT_UNLIKELY(mt_python_on))
		mt_python_forget((uintptr_t)old, old_len);
	if (!mt_config.trace_mmap || !mt_enter())
		return mt_real.mremap(old, old_len, len, flags, want);
	MT_MARK_CALLER();
	t0 = mt_now();
	p = mt_real.mremap(old, old_len, len, flags, want);
	int err = errno;
	if (p != MAP_FAILED)
		mt_rec_mremap(t0, old, old_len, p, len);
	mt_leave(err);
	return p;
}
