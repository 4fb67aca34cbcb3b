/* SPDX-License-Identifier: MIT */
/*
 * Start-up and shutdown of tracing in one process: the state machine every
 * interposed function checks, the constructor that finishes what cannot be
 * done inside an arbitrary first malloc, the fork handler, and the one-line
 * messages memtrace may print.
 *
 * May not: print more than one line per problem, abort, or leave errno
 * changed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt.h"

_Atomic int mt_state;
MT_TLS struct mt_thread mt_self;

static bool joined; /* this process joined a trace made by an ancestor */

bool mt_use_tsc;

uint64_t mt_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mt_say(const char *fmt, ...)
{
	char line[512];
	int saved = errno;
	va_list ap;
	int n;

	memcpy(line, "memtrace: ", 10);
	va_start(ap, fmt);
	n = vsnprintf(line + 10, sizeof(line) - 11, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	n += 10;
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere else to say it */
	}
	errno = saved;
}

void mt_disable(const char *why, int err)
{
	int expected = MT_ON;

	if (!atomic_compare_exchange_strong(&mt_state, &expected, MT_DISABLED)) {
		expected = MT_STARTING;
		if (!atomic_compare_exchange_strong(&mt_state, &expected, MT_DISABLED))
			return; /* already off: said once */
	}
	if (err)
		mt_say("%s: %s; tracing stops, the program runs on", why, strerror(err));
	else
		mt_say("%s; tracing stops, the program runs on", why);
}

/*
 * The TSC is used when the kernel itself keeps time with it: then it runs at
 * a constant rate and agrees across CPUs, which cross-thread order needs.
 */
static bool tsc_usable(void)
{
#if defined(__x86_64__)
	char buf[32] = {0};
	int f = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
	             O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (f < 0)
		return false;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	return n >= 3 && !strncmp(buf, "tsc", 3) && (buf[3] == '\n' || buf[3] == 0);
#else
	return false;
#endif
}

void mt_init(void)
{
	int expected = MT_OFF_YET;
	bool guard = mt_self.guard;
	int saved = errno;
	const char *token;
	int r;

	if (!atomic_compare_exchange_strong(&mt_state, &expected, MT_STARTING))
		return;
	mt_self.guard = true;
	mt_real_resolve();
	mt_config_load();
	if (!mt_config.enable) {
		atomic_store(&mt_state, MT_DISABLED);
		goto out;
	}
	if (!mt_malloc_is_ours()) {
		/* stay out of the way entirely: no file, no thread, no environment */
		mt_say("the program's own malloc comes before memtrace's; nothing to trace");
		atomic_store(&mt_state, MT_DISABLED);
		goto out;
	}
	mt_use_tsc = tsc_usable();
	mt_pid = getpid();
	token = getenv("MEMTRACE_TREE");
	r = token ? mt_writer_join(token) : -ENOENT;
	joined = r == 0;
	if (!joined)
		r = mt_writer_create(mt_pid);
	if (r == 0)
		r = mt_stacks_init();
	if (r < 0) {
		/* the writer said what went wrong */
		atomic_store(&mt_state, MT_DISABLED);
		goto out;
	}
	mt_instance = mt_writer_new_instance();
	atomic_store(&mt_state, MT_ON);
	mt_process_record(joined ? MT_ORIGIN_EXEC : MT_ORIGIN_ROOT, 0, 0);
	mt_modules_init();
out:
	mt_self.guard = guard;
	errno = saved;
}

/* Fork child: a new process instance, with its own chunks and stack table. */
static void after_fork_child(void)
{
	bool guard = mt_self.guard;
	int saved = errno;
	uint32_t parent_instance = mt_instance;
	pid_t parent_pid = mt_pid;

	if (atomic_load(&mt_state) != MT_ON)
		return;
	mt_self.guard = true;
	mt_pid = getpid();
	mt_writer_after_fork();
	mt_stacks_after_fork();
	mt_process_record(MT_ORIGIN_FORK, parent_instance, parent_pid);
	mt_modules_after_fork();
	mt_sampler_start();
	mt_self.guard = guard;
	errno = saved;
}

/*
 * Runs before main. What could deadlock inside an arbitrary first malloc
 * (setenv and pthread_atfork take libc locks, a thread needs a set-up libc)
 * is done here.
 */
__attribute__((constructor)) static void start(void)
{
	bool guard = mt_self.guard;
	int saved = errno;

	mt_real_resolve();
	mt_init();
	if (atomic_load(&mt_state) != MT_ON)
		return;
	mt_self.guard = true;
	if (!joined)
		mt_writer_export_token();
	pthread_atfork(NULL, NULL, after_fork_child);
	mt_writer_thread_key();
	mt_sampler_start();
	mt_self.guard = guard;
	errno = saved;
}
