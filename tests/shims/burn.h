/* SPDX-License-Identifier: MIT */
/*
 * What the LD_PRELOAD shims that make a call dear share (tests/capture's
 * slow-smaps, tests/oom's slow-mallinfo2): CPU burnt in the calling
 * thread, and the count the test reads, written at exit to the file an
 * environment variable names.
 *
 * May not: be installed; it is for test fixtures.
 */
#ifndef MEMTRACE_TESTS_SHIMS_BURN_H
#define MEMTRACE_TESTS_SHIMS_BURN_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spends ns of this thread's CPU time. */
static void burn(long long ns)
{
	for (long long start = thread_cpu_ns(); thread_cpu_ns() - start < ns;)
		;
}

/* line into the file named by the environment variable env, if set. No stdio: nothing
 * allocated at the exit of a traced program. A short write leaves the test no count to
 * read, and it fails. */
static void report_to(const char *env, const char *line)
{
	const char *path = getenv(env);
	size_t n = strlen(line);
	int fd;

	if (!path || (fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return;
	if (write(fd, line, n) != (ssize_t)n)
		(void)ftruncate(fd, 0);
	close(fd);
}

#endif
