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
 * Context: any thread, any time; the program's own calls pay a TLS load.
 */
#define UNW_LOCAL_ONLY
#include <errno.h>
#include <libunwind.h>
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

MT_EXPORT int pipe2(int fds[2], int flags)
{
	uintptr_t caller = (uintptr_t)__builtin_return_address(0);
	int r = (int)syscall(SYS_pipe2, fds, flags);
	int rd, wr;

	if (r < 0 || !mt_self.guard || !from_libunwind(caller))
		return r;
	/* O_NONBLOCK belongs to the pipe, not the number: the moved ones keep it */
	rd = mt_fd_keep(MT_FD_UNWIND_READ, fds[0]);
	wr = mt_fd_keep(MT_FD_UNWIND_WRITE, fds[1]);
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
	return 0;
}
