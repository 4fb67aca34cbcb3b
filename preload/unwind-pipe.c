/* SPDX-License-Identifier: MIT */
/*
 * libunwind's memory checks, kept out of the program's descriptors.
 * libunwind 1.6 checks an address before it reads it by writing one byte
 * from it into a pipe that it opens once, keeps, and opens again (closing
 * the old numbers first) whenever a read from it fails. Made by pipe2 at the
 * lowest free numbers, that pipe would sit among the program's own: its next
 * open() would get another number than untraced, and a program that closes
 * every descriptor and reuses 3 and 4 would have libunwind close them or
 * write into its files. So pipe2 is interposed: a call made from libunwind's
 * code while this thread is inside memtrace gets its pipe moved to fds.c's
 * high, protected numbers; every other call is the plain system call.
 *
 * A program's dup2 onto one of those numbers moves the pipe again (fds.c),
 * and libunwind's own copy of the numbers (the array it gave pipe2) is
 * renumbered with it. So that no walk reads a number while it changes,
 * memtrace's libunwind walks are counted (mt_unwind_pipe_enter/leave) and a
 * move waits until none is under way.
 *
 * Context: any thread, any time; the program's own calls pay a TLS load.
 */
#define UNW_LOCAL_ONLY
#include <errno.h>
#include <libunwind.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mt.h"

/* Whether the code at ip is libunwind's: its range is found once, inside memtrace. */
static bool from_libunwind(uintptr_t ip)
{
	static _Atomic uintptr_t lo, hi;

	if (!atomic_load_explicit(&hi, memory_order_acquire)) {
		uintptr_t l, h;
		if (!mt_module_range((uintptr_t)&unw_backtrace, &l, &h))
			return false;
		atomic_store(&lo, l);
		atomic_store_explicit(&hi, h, memory_order_release);
	}
	return ip >= atomic_load(&lo) && ip < atomic_load(&hi);
}

static int *libunwind_fds;       /* libunwind's array of the pipe's two numbers */
static _Atomic unsigned walkers; /* memtrace's libunwind walks under way */
static _Atomic bool moving;      /* a move of the pipe is under way */
static MT_TLS bool walking;      /* this thread is in one of those walks */

void mt_unwind_pipe_enter(void)
{
	for (;;) {
		while (atomic_load(&moving))
			sched_yield();
		atomic_fetch_add(&walkers, 1);
		if (!atomic_load(&moving))
			break;
		atomic_fetch_sub(&walkers, 1);
	}
	walking = true;
}

void mt_unwind_pipe_leave(void)
{
	walking = false;
	atomic_fetch_sub(&walkers, 1);
}

bool mt_unwind_pipe_pause(void)
{
	bool no = false;

	/* a signal handler that interrupted this thread's walk would wait for itself */
	if (walking || !atomic_compare_exchange_strong(&moving, &no, true))
		return false;
	while (atomic_load(&walkers))
		sched_yield();
	return true;
}

void mt_unwind_pipe_renumber(int from, int to)
{
	for (int i = 0; libunwind_fds && i < 2; i++)
		if (libunwind_fds[i] == from)
			libunwind_fds[i] = to;
}

void mt_unwind_pipe_resume(void)
{
	atomic_store(&moving, false);
}

MT_EXPORT int pipe2(int fds[2], int flags)
{
	uintptr_t caller = (uintptr_t)__builtin_return_address(0);
	int r = (int)syscall(SYS_pipe2, fds, flags);
	struct stat pipe_id;
	int rd, wr;

	if (r < 0 || !mt_self.guard || !from_libunwind(caller))
		return r;
	/* O_NONBLOCK belongs to the pipe, not the number: the moved ones keep it.
	 * The two ends share one inode, taken now: a number the program took
	 * meanwhile (its double close) is not moved, nor closed */
	if (fstat(fds[1], &pipe_id) < 0)
		return r;
	rd = mt_fd_keep(MT_FD_UNWIND_READ, fds[0], &pipe_id);
	wr = mt_fd_keep(MT_FD_UNWIND_WRITE, fds[1], &pipe_id);
	if (rd < 0 || wr < 0) {
		/* no high numbers: libunwind takes every address as unreadable and
		 * ends the stack there, rather than keep a pipe among the program's */
		mt_fd_drop(MT_FD_UNWIND_READ);
		mt_fd_drop(MT_FD_UNWIND_WRITE);
		errno = EMFILE;
		return -1;
	}
	fds[0] = rd;
	fds[1] = wr;
	libunwind_fds = fds;
	return 0;
}
