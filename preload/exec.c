/* SPDX-License-Identifier: MIT */
/*
 * The exec functions: each writes an EXEC record naming the program it was
 * given, then calls libc's. An exec that succeeds ends the process instance.
 * When the new program is one memtrace cannot enter (static, setuid, an
 * environment without LD_PRELOAD) nothing of the pid follows the EXEC, and
 * the analyzer says the process was replaced by an untraced program instead
 * of killed. An exec that fails returns, and the records after it say so.
 *
 * glibc's system(), popen() and posix_spawn() exec inside libc, by calls no
 * library can interpose, in a CLONE_VM|CLONE_VFORK child that is no traced
 * instance: no record is written there, and none is needed, since the
 * caller's instance goes on and the program run is traced (or not) as a
 * process of its own. A vfork child that calls these functions itself runs
 * on its parent's memory and records nothing either.
 *
 * The execl functions build their argv on the stack, as glibc's do.
 *
 * Context: exec paths, any thread; a system call is allowed. May not change
 * errno before the real call, or what the program passed.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mt.h"

/* Whether this exec is to be recorded: tracing on, not inside memtrace, not a vfork child. */
static bool recording(void)
{
	return atomic_load(&mt_state) == MT_ON && !mt_self.guard && !mt_process_in_parent_memory();
}

static void record(const char *path, size_t n)
{
	uint8_t *rec, *q;

	mt_self.guard = true;
	rec = mt_room(4 + 2 * MT_MAX_VARINT + n);
	if (rec) {
		q = mt_put_time(rec + 4, mt_now());
		q = mt_put_bytes(q, path, n);
		mt_commit_large(rec, MT_REC_EXEC, q);
	}
	mt_self.guard = false;
}

/*
 * libc declares the paths nonnull, which would let the compiler drop our
 * NULL checks; a program that passes NULL anyway gets EFAULT from the
 * kernel untraced, and must not crash here instead. The empty asm hides
 * where the pointer came from.
 */
static const char *unknown(const char *p)
{
	__asm__("" : "+r"(p));
	return p;
}

static void record_path(const char *path)
{
	int err = errno;

	path = unknown(path);
	if (recording())
		record(path ? path : "", path ? strnlen(path, MT_MAX_STRING) : 0);
	errno = err;
}

/*
 * The program of an exec through a descriptor: what fd names in
 * /proc/self/fd, then "/" and rest when rest is not empty.
 */
static void record_fd_path(int fd, const char *rest)
{
	char link[32], path[MT_MAX_STRING];
	int err = errno;
	ssize_t n;
	size_t len;

	if (!recording())
		return;
	rest = unknown(rest);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path));
	len = n > 0 ? (size_t)n : 0;
	if (rest && *rest && len < sizeof(path)) {
		path[len++] = '/';
		size_t m = strnlen(rest, sizeof(path) - len);
		memcpy(path + len, rest, m);
		len += m;
	}
	record(path, len);
	errno = err;
}

/* A function libc lacks fails as its absence would. */
static int missing(void)
{
	errno = ENOSYS;
	return -1;
}

static int exec_v(const char *path, char *const argv[])
{
	record_path(path);
	mt_real_resolve();
	return mt_real.execv ? mt_real.execv(path, argv) : missing();
}

static int exec_vp(const char *file, char *const argv[])
{
	record_path(file);
	mt_real_resolve();
	return mt_real.execvp ? mt_real.execvp(file, argv) : missing();
}

static int exec_ve(const char *path, char *const argv[], char *const envp[])
{
	record_path(path);
	mt_real_resolve();
	return mt_real.execve ? mt_real.execve(path, argv, envp) : missing();
}

MT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return exec_ve(path, argv, envp);
}

MT_EXPORT int execv(const char *path, char *const argv[])
{
	return exec_v(path, argv);
}

MT_EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_vp(file, argv);
}

MT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	record_path(file);
	mt_real_resolve();
	return mt_real.execvpe ? mt_real.execvpe(file, argv, envp) : missing();
}

MT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	record_fd_path(fd, NULL);
	mt_real_resolve();
	return mt_real.fexecve ? mt_real.fexecve(fd, argv, envp) : missing();
}

MT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                       int flags)
{
	const char *p = unknown(path);

	if (dirfd == AT_FDCWD || (p && p[0] == '/'))
		record_path(path);
	else
		record_fd_path(dirfd, path);
	mt_real_resolve();
	return mt_real.execveat ? mt_real.execveat(dirfd, path, argv, envp, flags) : missing();
}

/*
 * 1 + the arguments after an execl function's arg up to the NULL that ends
 * them, counted as glibc counts them (arg itself is not looked at), or -1
 * past INT_MAX (glibc's E2BIG).
 */
static ptrdiff_t count_args(va_list ap)
{
	ptrdiff_t argc;

	for (argc = 1; va_arg(ap, const char *); argc++)
		if (argc == INT_MAX)
			return -1;
	return argc;
}

/* Fills argv[1 .. argc] (the last one the NULL) from ap. */
static void take_args(char **argv, ptrdiff_t argc, va_list ap)
{
	for (ptrdiff_t i = 1; i <= argc; i++)
		argv[i] = va_arg(ap, char *);
}

static int too_many(void)
{
	errno = E2BIG;
	return -1;
}

MT_EXPORT int execl(const char *path, const char *arg, ...)
{
	ptrdiff_t argc;
	va_list ap;

	va_start(ap, arg);
	argc = count_args(ap);
	va_end(ap);
	if (argc < 0)
		return too_many();
	char *argv[argc + 1];
	argv[0] = (char *)arg;
	va_start(ap, arg);
	take_args(argv, argc, ap);
	va_end(ap);
	return exec_v(path, argv);
}

MT_EXPORT int execlp(const char *file, const char *arg, ...)
{
	ptrdiff_t argc;
	va_list ap;

	va_start(ap, arg);
	argc = count_args(ap);
	va_end(ap);
	if (argc < 0)
		return too_many();
	char *argv[argc + 1];
	argv[0] = (char *)arg;
	va_start(ap, arg);
	take_args(argv, argc, ap);
	va_end(ap);
	return exec_vp(file, argv);
}

/* The environment follows the NULL that ends the arguments. */
MT_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp;
	ptrdiff_t argc;
	va_list ap;

	va_start(ap, arg);
	argc = count_args(ap);
	va_end(ap);
	if (argc < 0)
		return too_many();
	char *argv[argc + 1];
	argv[0] = (char *)arg;
	va_start(ap, arg);
	take_args(argv, argc, ap);
	envp = va_arg(ap, char *const *);
	va_end(ap);
	return exec_ve(path, argv, envp);
}
