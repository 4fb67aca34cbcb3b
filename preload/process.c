/* SPDX-License-Identifier: MIT */
/*
 * The process's own records: PROCESS when an instance starts, EXIT when it
 * ends cleanly, and the interposed exit paths that tell how it ended.
 *
 * main's return value is caught by wrapping main in __libc_start_main (libc
 * calls exit internally after main returns, out of reach of interposition).
 * The EXIT record is written from this library's destructor, which runs in
 * _dl_fini after the program's atexit handlers and the destructors of the
 * libraries loaded after it: what is live then is what stays live at exit.
 * Events after it are still recorded.
 *
 * Context: init, fork child, exit paths.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtrace/memtrace.h"
#include "mt.h"

/* glibc declares none of these in a header; this is the x86_64/aarch64 form. */
int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end);

static int (*program_main)(int, char **, char **);
uintptr_t mt_exit_sp;

/* The stack pointer of the calling function, after its callee-saved registers were spilled. */
#if defined(__x86_64__)
#define CURRENT_SP(sp) __asm__ volatile("mov %%rsp, %0" : "=r"(sp))
#elif defined(__aarch64__)
#define CURRENT_SP(sp) __asm__ volatile("mov %0, sp" : "=r"(sp))
#endif
static _Atomic int exit_how;
static int exit_status;
static _Atomic bool exit_written;

static size_t read_file(const char *name, char *buf, size_t size)
{
	int f = open(name, O_RDONLY | O_CLOEXEC);
	size_t n = 0;

	if (f < 0)
		return 0;
	while (n < size) {
		ssize_t r = read(f, buf + n, size - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(f);
	return n;
}

void mt_process_record(unsigned origin, uint32_t parent_instance, pid_t parent_pid)
{
	static char exe[MT_MAX_STRING], cmd[MT_MAX_STRING];
	ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof(exe));
	size_t cmd_len = read_file("/proc/self/cmdline", cmd, sizeof(cmd));
	struct timespec rt;
	uint8_t *rec, *q;

	(void)parent_pid;
	if (exe_len < 0)
		exe_len = 0;
	clock_gettime(CLOCK_REALTIME, &rt);
	rec = mt_room(64 + (size_t)exe_len + cmd_len + 8 * MT_MAX_VARINT);
	if (!rec)
		return;
	q = mt_put_time(rec + 4, mt_now());
	q = mt_put_varint(q, (uint64_t)mt_pid);
	q = mt_put_varint(q, (uint64_t)getppid());
	q = mt_put_varint(q, origin);
	q = mt_put_varint(q, parent_instance);
	q = mt_put_varint(q, (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec);
	q = mt_put_bytes(q, exe, (size_t)exe_len);
	q = mt_put_bytes(q, cmd, cmd_len);
	q = mt_put_varint(q, mt_config.depth);
	if (mt_config.sampling) /* a full capture's PROCESS stays as it was */
		q = mt_put_varint(q, mt_config.sampling);
	mt_commit_large(rec, MT_REC_PROCESS, q);
}

bool mt_process_in_parent_memory(void)
{
	return getpid() != mt_pid;
}

void mt_process_exit_record(unsigned how, int status, bool interrupted)
{
	uint8_t *rec, *q;

	/* a vfork child's _exit after a failed exec: the parent's instance goes on */
	if (mt_process_in_parent_memory() || atomic_exchange(&exit_written, true))
		return;
	if (atomic_load(&mt_state) != MT_ON) {
		/* not from a handler: the interrupted code may be this thread's writer */
		if (atomic_load(&mt_state) == MT_DISABLED && !interrupted)
			mt_writer_stop_unsaid();
		return;
	}
	/*
	 * _exit from a signal handler that interrupted memtrace, and so maybe
	 * glibc's malloc under its arena lock: no heap figures (mallinfo2 would
	 * wait for that lock for ever), no new chunk (the interrupted code may be
	 * claiming one), and a record the interrupted code had published (type
	 * byte set, mt_commit_*) but not yet passed is kept. The writer keeps
	 * base NULL whenever pos and end are not a chunk's (writer.c).
	 */
	if (interrupted) {
		struct mt_thread *t = &mt_self;
		if (!t->base)
			return;
		if (*t->pos) /* a short record has no length byte: its varints say where it ends */
			t->pos += mt_record_span(t->pos);
		/* the room every chunk keeps (writer.c) is for this too */
		t->end += MT_STOP_RESERVE;
		if (t->pos > t->end || (size_t)(t->end - t->pos) < 4 + 4 * MT_MAX_VARINT)
			return;
	} else {
		mt_sampler_last(); /* the last figures before the end */
	}
	rec = mt_room(4 + 4 * MT_MAX_VARINT);
	if (!rec)
		return;
	q = mt_put_time(rec + 2, mt_now());
	q = mt_put_varint(q, how);
	q = mt_put_varint(q, (uint32_t)status);
	q = mt_put_varint(q, mt_monotonic_ns());
	mt_commit_small(rec, MT_REC_EXIT, q);
}

__attribute__((destructor)) static void finish(void)
{
	bool guard = mt_self.guard;
	int how = atomic_load(&exit_how);

	mt_self.guard = true;
	/* not from a signal handler that interrupted memtrace, not twice, not a vfork child */
	if (!guard && atomic_load(&mt_state) == MT_ON && !atomic_load(&exit_written) &&
	    !mt_process_in_parent_memory())
		mt_reach_at_exit();
	mt_process_exit_record(how ? (unsigned)how : MT_EXIT_UNKNOWN, exit_status, guard);
	mt_self.guard = guard;
}

static int main_wrapper(int argc, char **argv, char **envp)
{
	int r = program_main(argc, argv, envp);
	int zero = 0;
	uintptr_t sp;

	/* main's frames are dead from here: the reachability scan starts above them */
	CURRENT_SP(sp);
	mt_exit_sp = sp;
	if (atomic_compare_exchange_strong(&exit_how, &zero, MT_EXIT_MAIN_RETURN))
		exit_status = r;
	return r;
}

MT_EXPORT int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv,
                                void (*init)(void), void (*fini)(void), void (*rtld_fini)(void),
                                void *stack_end)
{
	mt_real_resolve();
	program_main = main;
	return mt_real.libc_start_main(main_wrapper, argc, argv, init, fini, rtld_fini, stack_end);
}

MT_EXPORT void exit(int status)
{
	int zero = 0;
	uintptr_t sp;

	/*
	 * The caller's frames stay live (exit does not return), and the
	 * registers it may keep a block in are spilled into this frame: the
	 * reachability scan reads the stack from here up, and not the frames of
	 * the exit handlers, whose stale slots would keep dead blocks.
	 */
	__builtin_unwind_init();
	CURRENT_SP(sp);
	if (!mt_exit_sp)
		mt_exit_sp = sp;
	/* exit_how is the parent's in a vfork child, which must not set it */
	if (atomic_load(&mt_state) == MT_ON && !mt_process_in_parent_memory() &&
	    atomic_compare_exchange_strong(&exit_how, &zero, MT_EXIT_EXIT))
		exit_status = status;
	mt_real_resolve();
	mt_real.exit(status);
}

static void underscore_exit(int status)
{
	bool guard = mt_self.guard;

	mt_self.guard = true;
	mt_process_exit_record(MT_EXIT_UNDERSCORE, status, guard);
	mt_self.guard = guard;
}

MT_EXPORT void _exit(int status)
{
	underscore_exit(status);
	mt_real_resolve();
	mt_real._exit(status);
}

MT_EXPORT void _Exit(int status)
{
	underscore_exit(status);
	mt_real_resolve();
	mt_real._Exit(status);
}

/* The program's marks (include/memtrace/memtrace.h). */
MT_EXPORT int memtrace_mark(const char *label)
{
	size_t n = label ? strnlen(label, 256) : 0;
	uint8_t *rec, *q;

	if (!mt_enter())
		return -1;
	int err = errno;
	rec = mt_room(8 + 2 * MT_MAX_VARINT + n);
	if (rec) {
		q = mt_put_time(rec + 4, mt_now());
		q = mt_put_bytes(q, label ? label : "", n);
		mt_commit_large(rec, MT_REC_MARK, q);
	}
	mt_leave(err);
	return rec ? 0 : -1;
}
