/* SPDX-License-Identifier: MIT */
/*
 * The descriptors memtrace keeps (the trace file, the sampler's /proc and
 * cgroup files), out of the program's way. The program shares one
 * descriptor table with memtrace: a number memtrace holds is a number the
 * program may close, reuse or dup2 onto, and a number memtrace closes may
 * by then be the program's. So each kept descriptor lives in a slot: moved
 * to a number far above the program's (F_DUPFD_CLOEXEC from a high base),
 * remembered by device and inode, and checked against them before each use
 * and before memtrace closes it.
 *
 * The interposed close, close_range, closefrom, dup2 and dup3 keep the
 * program from taking a kept number: to the program it looks free. A close
 * of one fails with EBADF, as it would untraced; close_range and closefrom
 * close everything else; dup2/dup3 onto one first move memtrace's file to
 * another high number. fcntl needs no wrapper: F_DUPFD and
 * F_DUPFD_CLOEXEC take the lowest free number, never an open one (Linux
 * has no F_DUP2FD). What cannot be caught: glibc's internal closes and dups
 * (posix_spawn's file actions, which run in the child's own table just
 * before its exec, where memtrace's close-on-exec numbers vanish anyway;
 * fclose of a stream fdopen'd on a kept number, which fails untraced too),
 * and raw system calls: the dev/ino check then finds the slot's number no
 * longer ours, and memtrace forgets it without touching it.
 *
 * Fork: the child's table holds copies of the same open files, so the
 * slots stay valid there and nothing needs to be done; a user whose file
 * is bound to the parent (/proc/self/...) drops and reopens it (sampler).
 * vfork (or any clone sharing memory but not the table): the child must not
 * change the slots, which are the parent's memory; its table is its own
 * and loses our close-on-exec numbers at its exec, so its calls pass
 * through untouched.
 *
 * A slot's number changes only under its lock (keep, drop, and a program's
 * dup2 onto it), and a user of the number holds the lock while it uses it
 * (mt_fd_hold), so a move can never hand the user the program's file. The
 * lock is a word holding the holder's thread id: only taken on these rare
 * paths, never in the steady state of the program.
 *
 * Context: the wrappers run in any thread, before init (mt_real may not be
 * resolved: then the raw system call), in signal handlers and in vfork
 * children. They leave errno exactly as the real call would.
 * May not: allocate, print, close a number not verified to be ours.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mt.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Kept numbers go below 1024 even when the limit is far higher: the kernel
 * sizes a descriptor table to its highest open number and fork copies it,
 * so a number near a limit of 1M would cost 8 MiB per process and per fork. */
#define HIGH_CAP 1024
#define HIGH_GAP 64

struct slot {
	_Atomic int fd; /* -1: none; dev/ino are written only while it is -1 */
	dev_t dev;
	ino_t ino;
	_Atomic pid_t lock; /* holder's thread id, 0 when free */
};

static struct slot slots[] = {
        {.fd = -1}, {.fd = -1}, {.fd = -1}, {.fd = -1},
        {.fd = -1}, {.fd = -1}, {.fd = -1}, {.fd = -1},
};
_Static_assert(sizeof(slots) / sizeof(slots[0]) == MT_FD_SLOTS, "one slot per enum mt_fd_slot");
static _Atomic pid_t owner;  /* the process whose memory the slots describe */
static MT_TLS int held_here; /* this thread holds a slot lock (signal handler check) */

static int real_close(int fd)
{
	return mt_real.close ? mt_real.close(fd) : (int)syscall(SYS_close, fd);
}

static int real_close_range(unsigned first, unsigned last, int flags)
{
	return mt_real.close_range ? mt_real.close_range(first, last, flags)
	                           : (int)syscall(SYS_close_range, first, last, flags);
}

static int real_dup3(int old, int new, int flags, bool is_dup2)
{
	if (is_dup2)
		return mt_real.dup2 ? mt_real.dup2(old, new) : (int)syscall(SYS_dup2, old, new);
	return mt_real.dup3 ? mt_real.dup3(old, new, flags)
	                    : (int)syscall(SYS_dup3, old, new, flags);
}

static bool same_file(int fd, const struct slot *s)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino;
}

/* The slot whose number fd is, or NULL: the cheap test every wrapper makes. */
static struct slot *slot_of(int fd)
{
	if (fd < 0)
		return NULL;
	for (int i = 0; i < MT_FD_SLOTS; i++)
		if (atomic_load_explicit(&slots[i].fd, memory_order_relaxed) == fd)
			return &slots[i];
	return NULL;
}

/*
 * May this process act on the slots? Yes in the process that kept them
 * and in anything sharing its table (threads); yes in a fork child, which
 * has its own copy of memory and table (it becomes the owner); no in a
 * vfork child, whose writes would land in the parent's slots. Rare path.
 */
static bool slots_are_ours(void)
{
	pid_t me = getpid(), o = atomic_load(&owner);
	int saved = errno;
	bool ours = true;

	if (me != o) {
		if (syscall(SYS_kcmp, me, o, KCMP_FILES, 0, 0) != 0)
			ours = syscall(SYS_kcmp, me, o, KCMP_VM, 0, 0) >
			       0; /* error: assume shared */
		if (ours)
			atomic_store(&owner, me);
	}
	errno = saved;
	return ours;
}

/* fd is a kept descriptor that the program must not touch. Rare path. */
static bool protected_fd(int fd)
{
	struct slot *s = slot_of(fd);
	int saved = errno;
	bool r;

	if (!s)
		return false;
	r = slots_are_ours() && same_file(fd, s);
	errno = saved;
	return r;
}

static pid_t thread_id(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/*
 * Takes a slot's lock; false when this very thread holds one (a signal
 * handler that interrupted memtrace's use of a number), which would spin
 * forever. A holder that is no longer a thread of this process (a fork
 * child inherits the lock word of a parent's thread) is replaced.
 */
static bool lock(struct slot *s)
{
	int saved = errno;
	pid_t me, expected;

	if (held_here)
		return false;
	held_here = 1; /* before the lock is ours: a handler must never spin on this thread */
	me = thread_id();
	for (unsigned spins = 0;; spins++) {
		expected = 0;
		if (atomic_compare_exchange_weak(&s->lock, &expected, me))
			break;
		if (spins % 64 == 63) {
			if (syscall(SYS_tgkill, getpid(), expected, 0) < 0 && errno == ESRCH &&
			    atomic_compare_exchange_strong(&s->lock, &expected, me))
				break;
			sched_yield();
		}
	}
	errno = saved;
	return true;
}

static void unlock(struct slot *s)
{
	atomic_store(&s->lock, 0);
	held_here = 0;
}

/* The first free number at or above a base far above the program's. */
static int move_high(int fd)
{
	struct rlimit rl;
	long base = 10;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 2 * HIGH_GAP) {
		long top = rl.rlim_cur < HIGH_CAP ? (long)rl.rlim_cur : HIGH_CAP;
		base = top - HIGH_GAP;
	}
	return fcntl(fd, F_DUPFD_CLOEXEC, (int)base);
}

/* Forgets the slot's number, closing it if it still is our file. Lock held. */
static void drop_locked(struct slot *s)
{
	int fd = atomic_exchange(&s->fd, -1);

	if (fd >= 0 && same_file(fd, s))
		real_close(fd);
}

int mt_fd_keep(enum mt_fd_slot slot, int fd, const struct stat *expect)
{
	struct slot *s = &slots[slot];
	int saved = errno, high, r;
	struct stat st, again;

	/*
	 * The number is still the file memtrace opened, unless the program closed
	 * it (a double close of a stale number of its own) and opened another
	 * there: then it is the program's, neither kept nor closed.
	 */
	if (fstat(fd, &st) < 0 || st.st_dev != expect->st_dev || st.st_ino != expect->st_ino) {
		errno = saved;
		return -ESTALE;
	}
	if (!lock(s)) {
		if (fstat(fd, &again) == 0 && again.st_dev == st.st_dev &&
		    again.st_ino == st.st_ino)
			real_close(fd);
		errno = saved;
		return -EBUSY;
	}
	drop_locked(s);
	high = move_high(fd);
	r = high >= 0 ? high : -errno;
	/* the copy must be of our file too: the same race, a moment later */
	if (high >= 0 &&
	    (fstat(high, &again) < 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino)) {
		real_close(high); /* a copy of the program's file: ours to close */
		high = -1;
		r = -ESTALE;
	}
	/* the original number: closed if it still is our file */
	if (fstat(fd, &again) == 0 && again.st_dev == st.st_dev && again.st_ino == st.st_ino)
		real_close(fd);
	if (high >= 0) {
		s->dev = st.st_dev;
		s->ino = st.st_ino;
		atomic_store(&owner, getpid());
		atomic_store_explicit(&s->fd, high, memory_order_release);
	}
	unlock(s);
	errno = saved;
	return r;
}

int mt_fd_hold(enum mt_fd_slot slot)
{
	struct slot *s = &slots[slot];
	int saved = errno, fd;

	if (atomic_load_explicit(&s->fd, memory_order_relaxed) < 0 || !lock(s))
		return -1;
	fd = atomic_load(&s->fd);
	if (fd >= 0 && !same_file(fd, s)) {
		/* the number is someone else's now: forget it, do not close it */
		atomic_store(&s->fd, -1);
		fd = -1;
	}
	if (fd < 0)
		unlock(s);
	errno = saved;
	return fd;
}

void mt_fd_release(enum mt_fd_slot slot)
{
	unlock(&slots[slot]);
}

void mt_fd_drop(enum mt_fd_slot slot)
{
	struct slot *s = &slots[slot];
	int saved = errno;

	if (atomic_load_explicit(&s->fd, memory_order_relaxed) < 0 || !lock(s))
		return;
	drop_locked(s);
	unlock(s);
	errno = saved;
}

MT_EXPORT int close(int fd)
{
	if (MT_UNLIKELY(slot_of(fd)) && protected_fd(fd)) {
		errno = EBADF; /* as if the number were free, which it is to the program */
		return -1;
	}
	return real_close(fd);
}

/*
 * close_range: the real call on each stretch between kept numbers. CLOEXEC
 * closes nothing (and ours are close-on-exec already); unknown flags and an
 * empty range fail in the real call. UNSHARE goes with the first stretch,
 * or on its own when there is none.
 */
MT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	unsigned lo = first;
	int pending = flags & (int)CLOSE_RANGE_UNSHARE, r;
	int kept[MT_FD_SLOTS], n = 0;

	if ((flags & ~(int)CLOSE_RANGE_UNSHARE) || first > last)
		return real_close_range(first, last, flags);
	for (int i = 0; i < MT_FD_SLOTS; i++) {
		int fd = atomic_load_explicit(&slots[i].fd, memory_order_relaxed);
		if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last && protected_fd(fd))
			kept[n++] = fd;
	}
	if (!n)
		return real_close_range(first, last, flags);
	for (int i = 1; i < n; i++) /* ascending; a handful of numbers */
		for (int j = i; j > 0 && kept[j - 1] > kept[j]; j--) {
			int t = kept[j];
			kept[j] = kept[j - 1];
			kept[j - 1] = t;
		}
	for (int i = 0; i <= n; i++) {
		unsigned hi = i < n ? (unsigned)kept[i] - 1 : last; /* ours are >= 10 */
		if (lo <= hi) {
			if ((r = real_close_range(lo, hi, pending)) < 0)
				return r;
			pending = 0;
		}
		if (i < n)
			lo = (unsigned)kept[i] + 1;
	}
	if (pending)
		return (int)syscall(SYS_unshare, CLONE_FILES);
	return 0;
}

/*
 * closefrom: the stretches below kept numbers by close_range, the top one
 * by the real closefrom (whose fallback, for kernels without close_range,
 * is the only one that can list /proc/self/fd). The stretches below are
 * bounded by the high base, so a loop of closes is their fallback.
 */
MT_EXPORT void closefrom(int lowfd)
{
	unsigned lo = lowfd < 0 ? 0 : (unsigned)lowfd;
	int saved = errno, top = -1;

	for (int i = 0; i < MT_FD_SLOTS; i++) {
		int fd = atomic_load_explicit(&slots[i].fd, memory_order_relaxed);
		if (fd >= 0 && (unsigned)fd >= lo && protected_fd(fd) && fd > top)
			top = fd;
	}
	if (top >= 0) {
		if (close_range(lo, (unsigned)top, 0) < 0)
			for (unsigned fd = lo; fd < (unsigned)top; fd++)
				if (!protected_fd((int)fd))
					real_close((int)fd);
		lo = (unsigned)top + 1;
		errno = saved;
	}
	if (mt_real.closefrom)
		mt_real.closefrom((int)lo);
	else if (syscall(SYS_close_range, lo, ~0U, 0) < 0)
		errno = saved; /* before init on an old kernel: nothing better to do */
}

/*
 * dup2/dup3 onto a kept number: memtrace's file moves to another high
 * number first (under the slot's lock, so a user of the number never sees
 * the program's file there), then the program's call runs as asked. From a
 * number ours: EBADF, as for a free one.
 */
static int dup_common(int old, int new, int flags, bool is_dup2)
{
	struct slot *s = slot_of(new);
	bool unwind_pipe;
	int r, err, high;

	if (protected_fd(old) && !(old == new && !is_dup2)) {
		errno = EBADF;
		return -1;
	}
	if (!s || old == new || !slots_are_ours())
		return real_dup3(old, new, flags, is_dup2);
	if (!lock(s)) {
		/* a signal handler interrupted memtrace's use of this very number */
		errno = EBUSY;
		return -1;
	}
	err = errno;
	if (atomic_load(&s->fd) != new || !same_file(new, s)) {
		unlock(s);
		errno = err;
		return real_dup3(old, new, flags, is_dup2);
	}
	/* libunwind keeps its pipe's numbers: no walk may run while they change */
	unwind_pipe = s >= &slots[MT_FD_UNWIND_READ];
	if (unwind_pipe && !mt_unwind_pipe_pause()) {
		/* a signal handler interrupted this thread's walk: EBUSY, what Linux
		 * says of a number being set up */
		unlock(s);
		errno = EBUSY;
		return -1;
	}
	high = move_high(new);
	/* no number free to move to: the program's call takes ours, which is forgotten */
	atomic_store(&s->fd, high);
	if (unwind_pipe) {
		mt_unwind_pipe_renumber(new, high);
		mt_unwind_pipe_resume();
	}
	errno = err;
	r = real_dup3(old, new, flags, is_dup2);
	if (r < 0 && high >= 0) {
		/* the real call failed before replacing new: it is a copy of our file */
		err = errno;
		if (same_file(new, s))
			real_close(new);
		errno = err;
	}
	unlock(s);
	return r;
}

MT_EXPORT int dup2(int old, int new)
{
	if (MT_LIKELY(!slot_of(new) && !slot_of(old)))
		return real_dup3(old, new, 0, true);
	return dup_common(old, new, 0, true);
}

MT_EXPORT int dup3(int old, int new, int flags)
{
	if (MT_LIKELY(!slot_of(new) && !slot_of(old)))
		return real_dup3(old, new, flags, false);
	return dup_common(old, new, flags, false);
}
