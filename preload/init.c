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
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt.h"

/* Where the state lives until tracing is on: then a wipe-on-fork page (mt.h). */
static struct mt_live boot_live;
struct mt_live *mt_live = &boot_live;
MT_TLS struct mt_thread mt_self;

static bool joined;          /* this process joined a trace made by an ancestor */
static _Atomic bool stopped; /* tracing stopped in this process (or the one it was cloned from) */
static bool started;         /* tracing was on in this process (or the one it was cloned from) */

bool mt_use_tsc;
bool mt_plain;

uint64_t mt_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The standard error this process was given, by identity. A program may
 * close descriptor 2 and open a file of its own there, as a daemon's log
 * does: a line written to 2 then goes into the program's file. A dup of
 * the old one is no answer either: it would hold a pipe's reader waiting
 * for an end the program has made. So a line is said only while 2 is
 * still the file memtrace was given, and otherwise not at all.
 */
static struct {
	_Atomic bool noted;
	bool open;
	dev_t dev;
	ino_t ino;
} given_stderr;

static void note_stderr(void)
{
	struct stat st;

	given_stderr.open = fstat(STDERR_FILENO, &st) == 0;
	given_stderr.dev = st.st_dev;
	given_stderr.ino = st.st_ino;
	atomic_store(&given_stderr.noted, true);
}

static bool stderr_is_given(void)
{
	struct stat st;

	if (!atomic_load(&given_stderr.noted))
		note_stderr();
	return given_stderr.open && fstat(STDERR_FILENO, &st) == 0 &&
	       st.st_dev == given_stderr.dev && st.st_ino == given_stderr.ino;
}

void mt_say(const char *fmt, ...)
{
	char line[512];
	int saved = errno;
	va_list ap;
	int n;

	/* errno kept here too: fstat of a descriptor 2 the program closed fails (EBADF), and
	 * callers on the hot path (mt_sample_keep's mt_disable) restore none */
	if (!stderr_is_given()) {
		errno = saved;
		return;
	}

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

bool mt_disable(const char *why, int err)
{
	int expected = MT_ON;

	if (!atomic_compare_exchange_strong(&mt_state, &expected, MT_DISABLED)) {
		expected = MT_STARTING;
		if (!atomic_compare_exchange_strong(&mt_state, &expected, MT_DISABLED))
			return false; /* already off: said once */
	}
	atomic_store(&stopped, true);
	mt_stacks_stop(); /* address space back: the program may be short of it */
	if (err)
		mt_say("%s: %s; tracing stops, the program runs on", why, strerror(err));
	else
		mt_say("%s; tracing stops, the program runs on", why);
	return true;
}

/*
 * Moves the state to a page that a child made without CLONE_VM sees zeroed
 * (Linux 4.14+). Without it, a child made by a raw clone() would write into
 * its parent's chunks; with it, such a child becomes an instance of its own.
 */
static void wipe_on_fork(void)
{
	struct mt_live *page = mt_real.mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (page == MAP_FAILED)
		return;
	if (madvise(page, 4096, MADV_WIPEONFORK) < 0) {
		mt_real.munmap(page, 4096);
		return;
	}
	atomic_store(&page->state, atomic_load(&boot_live.state));
	mt_live = page;
}

/*
 * This process is a child of a traced one, made by fork (its handler) or by
 * a clone that ran no handler (its first interposed call, mt_init): a new
 * process instance, with its own chunks and stack table. A raw clone's child
 * gets no sampler thread: glibc's thread bookkeeping is its parent's there.
 */
static void become_child(bool forked)
{
	uint32_t parent_instance = mt_instance;
	pid_t parent_pid = mt_pid;

	if (atomic_load(&stopped)) {
		atomic_store(&mt_state, MT_DISABLED);
		return;
	}
	mt_pid = getpid();
	mt_self.sample_rng = 0; /* the child's sampling is not the parent's repeated */
	mt_writer_after_fork();
	if (mt_stacks_after_fork() < 0) {
		/* the state stays off: with no table, no event can be recorded */
		mt_writer_stop("cannot map the stack table in a forked child", ENOMEM);
		return;
	}
	mt_python_after_fork();
	atomic_store(&mt_state, MT_ON);
	mt_process_record(MT_ORIGIN_FORK, parent_instance, parent_pid);
	mt_modules_after_fork();
	if (forked)
		mt_sampler_start();
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
	if (started) {
		become_child(false);
		goto out;
	}
	note_stderr();
	mt_real_resolve();
	mt_config_load();
	if (!mt_config.enable) {
		atomic_store(&mt_state, MT_DISABLED);
		goto out;
	}
	if (!mt_malloc_is_ours()) {
		/* stay out of the way: no trace, no thread; said once per run */
		if (!mt_writer_foreign_said())
			mt_say("the program's own malloc comes before memtrace's; nothing to "
			       "trace");
		atomic_store(&mt_state, MT_DISABLED);
		goto out;
	}
	mt_use_tsc = mt_config.tsc && tsc_usable();
	mt_plain = mt_use_tsc && !mt_config.sampling && mt_real.malloc && mt_real.free;
	mt_pid = getpid();
	token = getenv("MEMTRACE_TREE");
	r = token ? mt_writer_join(token) : -ENOENT;
	joined = r == 0;
	if (!joined)
		r = mt_writer_create(mt_pid);
	if (r == 0)
		r = mt_stacks_init();
	if (r == 0)
		r = mt_sampling_init();
	if (r < 0) {
		/* the writer said what went wrong */
		atomic_store(&mt_state, MT_DISABLED);
		goto out;
	}
	mt_instance = mt_writer_new_instance();
	started = true;
	wipe_on_fork();
	atomic_store(&mt_state, MT_ON);
	mt_process_record(joined ? MT_ORIGIN_EXEC : MT_ORIGIN_ROOT, 0, 0);
	mt_modules_init();
	mt_python_detect();
out:
	mt_self.guard = guard;
	errno = saved;
}

/* Fork child: a new process instance, unless an interposed call made it one already. */
static void after_fork_child(void)
{
	bool guard = mt_self.guard;
	int saved = errno;
	int expected = atomic_load(&mt_state);

	/* the state is MT_OFF_YET in the wiped page, or the parent's where the
	 * kernel has no MADV_WIPEONFORK; MT_ON for this pid: done already */
	if (!started || (expected == MT_ON && mt_pid == getpid()) ||
	    (expected != MT_OFF_YET && expected != MT_ON) ||
	    !atomic_compare_exchange_strong(&mt_state, &expected, MT_STARTING))
		return;
	mt_self.guard = true;
	become_child(true);
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
	pthread_atfork(NULL, mt_sampler_forked, after_fork_child);
	mt_writer_thread_key();
	mt_sampler_start();
	mt_self.guard = guard;
	errno = saved;
}
