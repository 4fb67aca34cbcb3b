/* SPDX-License-Identifier: MIT */
/*
 * At a normal exit, which live blocks anything still points to
 * (docs/reachability.md): the REACH and REACH_BLOCKS records.
 *
 * The scan runs in a copy of the process made by a raw clone: a snapshot
 * that the program's other threads, still running, cannot change under it,
 * and whose fault (a corrupt record, an unreadable page) cannot reach the
 * program. The clone raises no SIGCHLD and runs no fork handler, so the
 * program's handlers and its waitpid(-1) never see it (waited for with
 * __WALL). The copy rebuilds its live blocks from the trace, scans, and
 * hands the classes back through a shared mapping; the parent writes them.
 * A long trace is read back on two cores: the copy makes a second process
 * of its own the same way (mt_reach_fork), its child, never the program's.
 * The copy is the OOM killer's first choice (oom_score_adj 1000) and maps
 * no more than half the memory left to the cgroup (a quarter of the
 * machine's without a limit): an exit near the limit loses the scan, never
 * the program.
 *
 * Context: the exit path (memtrace's destructor), guard set.
 */
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mt.h"
#include "reach.h"

/*
 * The shared result: header, then addresses, then a class byte each. It is
 * reserved, not touched, at the largest size the address space allows (a
 * program under RLIMIT_AS may have little room left).
 */
#define OUT_MAX    (1ull << 30)
#define OUT_MIN    (256ull << 10)
#define OUT_HEADER 4096u
/* Addresses per REACH_BLOCKS record: about 20 KiB at most. */
#define PER_RECORD 2048u

/* ---- the chunks the copy reads back ---- */

/*
 * The offsets of the trace chunks this process claimed, and (inherited at a
 * fork, in the copied memory) those of its ancestors: the copy reads these
 * and no other. Walking every chunk of the file instead made each exit in
 * a process tree cost as much as the tree's trace so far: 2 ms of CPU for
 * each /bin/true of a 200-command shell loop. Appended on the slow path of
 * any thread; the first block is static, so a short process maps nothing.
 * A list that could not grow is given up for the whole file.
 */
#define CHUNK_BLOCK (1u << MT_REACH_CHUNK_BLOCK_BITS)
static uint64_t first_block[CHUNK_BLOCK];
static _Atomic(uint64_t *) chunk_blocks[MT_REACH_CHUNK_BLOCKS] = {first_block};
static _Atomic uint64_t chunk_count;
static _Atomic bool chunks_lost;

void mt_reach_note_chunk(uint64_t off)
{
	uint64_t i = atomic_fetch_add_explicit(&chunk_count, 1, memory_order_relaxed);
	uint64_t b = i >> MT_REACH_CHUNK_BLOCK_BITS;
	uint64_t *blk, *none = NULL;

	if (b >= MT_REACH_CHUNK_BLOCKS) {
		atomic_store(&chunks_lost, true);
		return;
	}
	blk = atomic_load_explicit(&chunk_blocks[b], memory_order_acquire);
	if (!blk) {
		blk = mt_own_map(CHUNK_BLOCK * sizeof(uint64_t));
		if (blk == MAP_FAILED) {
			atomic_store(&chunks_lost, true);
			return;
		}
		if (!atomic_compare_exchange_strong(&chunk_blocks[b], &none, blk)) {
			mt_own_unmap(blk,
			             CHUNK_BLOCK * sizeof(uint64_t)); /* another thread's won */
			blk = none;
		}
	}
	atomic_store_explicit((_Atomic uint64_t *)&blk[i & (CHUNK_BLOCK - 1)], off,
	                      memory_order_relaxed);
}

/* ---- the copy's own memory ---- */

uint64_t mt_reach_mapped, mt_reach_budget;
#define OWN_MAX 256
static struct mt_reach_range own[OWN_MAX];

static void own_set(void *old, void *p, size_t bytes)
{
	for (size_t i = 0; i < OWN_MAX; i++) {
		if (own[i].lo == (uintptr_t)old) {
			own[i] =
			        (struct mt_reach_range){(uintptr_t)p, p ? (uintptr_t)p + bytes : 0};
			return;
		}
	}
}

static size_t page_up(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

void *mt_reach_map(size_t bytes)
{
	void *p;

	bytes = page_up(bytes ? bytes : 1);
	if (mt_reach_mapped + bytes > mt_reach_budget)
		return NULL;
	p = (void *)syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE,
	                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	mt_reach_mapped += bytes;
	own_set(NULL, p, bytes);
	return p;
}

void *mt_reach_remap(void *p, size_t old, size_t bytes)
{
	void *q;

	old = page_up(old);
	bytes = page_up(bytes);
	if (mt_reach_mapped - old + bytes > mt_reach_budget)
		return NULL;
	q = (void *)syscall(SYS_mremap, p, old, bytes, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		return NULL;
	mt_reach_mapped = mt_reach_mapped - old + bytes;
	own_set(p, q, bytes);
	return q;
}

void mt_reach_unmap(void *p, size_t bytes)
{
	bytes = page_up(bytes);
	syscall(SYS_munmap, p, bytes);
	mt_reach_mapped -= bytes;
	own_set(p, NULL, 0);
}

void *mt_reach_map_shared(size_t bytes)
{
	void *p = (void *)syscall(SYS_mmap, NULL, page_up(bytes), PROT_READ | PROT_WRITE,
	                          MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	own_set(NULL, p, page_up(bytes));
	return p;
}

void mt_reach_unmap_shared(void *p, size_t bytes)
{
	syscall(SYS_munmap, p, page_up(bytes));
	own_set(p, NULL, 0);
}

/* ---- the copy's second process ---- */

/*
 * Made as the copy is made (mt_reach_at_exit): a raw clone with no exit
 * signal and no fork handler, a child of the copy, never of the program,
 * waited for with __WALL; the copy's oom_score_adj of 1000 and descriptors
 * are its own copies. Should the copy die first, it dies too
 * (PR_SET_PDEATHSIG), rather than read on for nothing. It says its results
 * are whole by a byte on a pipe of the copy's own, whose end without that
 * byte says it ended without: the copy goes on at once, while the kernel
 * takes the second process's memory down (40 ms a GB of the program's),
 * and reaps it only before it ends itself.
 */
static long second = -1;
static int handed[2] = {-1, -1};

long mt_reach_fork(void)
{
	long copy = syscall(SYS_getpid);
	uint64_t alrm = 1ull << (SIGALRM - 1), mask;

	if (syscall(SYS_pipe2, handed, O_CLOEXEC) < 0)
		return -1;
	/* the deadline's handler (out_of_time) knows the second process from its first moment */
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &alrm, &mask, sizeof(alrm));
	second = syscall(SYS_clone, 0, NULL, NULL, NULL, NULL);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, sizeof(alrm));
	if (second == 0) {
		syscall(SYS_close, handed[0]);
		syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (syscall(SYS_getppid) != copy)
			syscall(SYS_exit_group, 1);
		return 0;
	}
	syscall(SYS_close, handed[1]);
	if (second < 0) {
		syscall(SYS_close, handed[0]);
		handed[0] = -1;
	}
	return second;
}

void mt_reach_hand(void)
{
	syscall(SYS_write, handed[1], "", 1);
	syscall(SYS_exit_group, 0);
	__builtin_unreachable();
}

bool mt_reach_handed(void)
{
	char c;
	long r;

	do
		r = syscall(SYS_read, handed[0], &c, 1);
	while (r < 0 && errno == EINTR);
	syscall(SYS_close, handed[0]);
	handed[0] = -1;
	return r == 1;
}

void mt_reach_reap(bool kill)
{
	int st;

	if (second <= 0)
		return;
	if (handed[0] >= 0)
		syscall(SYS_close, handed[0]);
	handed[0] = -1;
	if (kill)
		syscall(SYS_kill, second, SIGKILL);
	while (syscall(SYS_wait4, (pid_t)second, &st, __WALL, NULL) < 0 && errno == EINTR)
		;
	second = -1;
}

/* The copy's resident bytes, what a clone of it copies the page tables of. */
uint64_t mt_reach_rss(void)
{
	char buf[128] = {0}, *p = buf;
	uint64_t pages = 0;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/statm", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	syscall(SYS_read, fd, buf, sizeof(buf) - 1);
	syscall(SYS_close, fd);
	while (*p && *p != ' ')
		p++;
	while (*p == ' ')
		p++;
	while (*p >= '0' && *p <= '9')
		pages = pages * 10 + (uint64_t)(*p++ - '0');
	return pages * 4096;
}

/* CPUs this process may run on. */
unsigned mt_reach_cpus(void)
{
	uint64_t set[16] = {0};
	long bytes = syscall(SYS_sched_getaffinity, 0, sizeof(set), set);
	unsigned n = 0;

	for (long i = 0; i < bytes / 8; i++)
		n += (unsigned)__builtin_popcountll(set[i]);
	return n;
}

void mt_reach_own_ranges(struct mt_reach_range *out, size_t room, size_t *n)
{
	size_t k = 0;

	for (size_t i = 0; i < OWN_MAX && k < room; i++)
		if (own[i].lo)
			out[k++] = own[i];
	*n += k;
}

/* ---- the copy ---- */

struct out {
	struct mt_reach_result r;
	uint64_t cap; /* blocks the area holds */
};

static uint64_t *out_addr(struct out *o)
{
	return (uint64_t *)((char *)o + OUT_HEADER);
}

static uint8_t *out_class(struct out *o)
{
	return (uint8_t *)((char *)o + OUT_HEADER + 8 * o->cap);
}

static struct out *out_map(size_t *bytes)
{
	for (*bytes = OUT_MAX; *bytes >= OUT_MIN; *bytes /= 4) {
		struct out *o =
		        (struct out *)syscall(SYS_mmap, NULL, *bytes, PROT_READ | PROT_WRITE,
		                              MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (o != MAP_FAILED) {
			o->cap = (*bytes - OUT_HEADER) / 9;
			return o;
		}
	}
	return NULL;
}

/*
 * The kernel's struct sigaction, not libc's: the copy sets its handlers by
 * the raw syscall, as libc's sigaction may be another library's (an
 * interposer's, waiting on a lock another thread held at the clone). Its
 * handlers never return, so the restorer x86-64's kernel asks for is never
 * reached.
 */
struct kernel_sigaction {
	void (*handler)(int, siginfo_t *, void *);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};
#define KERNEL_SA_RESTORER 0x04000000ul

static void never_returned_to(void)
{
	syscall(SYS_exit_group, 255);
}

void mt_reach_handle(int sig, void (*fn)(int, siginfo_t *, void *))
{
	struct kernel_sigaction on = {fn, SA_SIGINFO | SA_NODEFER | KERNEL_SA_RESTORER,
	                              never_returned_to, 0};

	syscall(SYS_rt_sigaction, sig, &on, NULL, sizeof(on.mask));
}

/*
 * The copy's own deadline (MEMTRACE_REACHABILITY_MS): the kernel ends it
 * with SIGALRM, wherever it is (a page of the trace read back from disk, a
 * heap of gigabytes scanned), and the exit goes on. An exit held for a
 * minute by a long run's trace would outlast a container's or a service
 * manager's grace after its stop signal: the program killed, its trace
 * saying so. The copy is its own process, so its timer, disposition and
 * mask are its own; SIGALRM's default ends it, whatever the program set,
 * once out_of_time has ended its second process, if any: that one would
 * outlive it, a child given to the copy's reaper (the program itself, were
 * it a subreaper or a container's first process), with a SIGCHLD.
 */
static void out_of_time(int sig, siginfo_t *si, void *uc)
{
	struct kernel_sigaction dfl = {NULL, 0, NULL, 0}; /* SIG_DFL is 0 */

	(void)si;
	(void)uc;
	mt_reach_reap(true);
	syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
	/* not blocked in its handler (SA_NODEFER): its default ends the copy now */
	syscall(SYS_tgkill, syscall(SYS_getpid), syscall(SYS_gettid), sig);
	__builtin_unreachable();
}

static void copy_deadline(void)
{
	uint64_t alrm = 1ull << (SIGALRM - 1);
	struct itimerval at = {{0, 0},
	                       {mt_config.reach_ms / 1000, mt_config.reach_ms % 1000 * 1000}};

	if (!mt_config.reach_ms)
		return;
	mt_reach_handle(SIGALRM, out_of_time);
	syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &alrm, NULL, sizeof(alrm));
	syscall(SYS_setitimer, ITIMER_REAL, &at, NULL);
}

static void copy_main(const struct mt_reach_input *in, struct out *o)
{
	struct mt_reach_block *b;
	size_t n;
	int fd, st;

	copy_deadline();

	/* if memory runs out now, the kernel takes this process, not the program */
	fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		syscall(SYS_write, fd, "1000", 4);
		syscall(SYS_close, fd);
	}
	st = mt_reach_live(in, &b, &n, &o->r.chunks, &o->r.detail);
	if (st) {
		o->r.status = (uint32_t)st;
		return;
	}
	if (n == 0) { /* nothing to classify: the roots are not worth reading */
		o->r.status = MT_REACH_DONE;
		return;
	}
	if (n > o->cap) {
		o->r.status = MT_REACH_TOO_MANY;
		o->r.detail = n;
		return;
	}
	st = mt_reach_scan(in, b, n, out_class(o), &o->r.scanned, &o->r.detail);
	if (st) {
		o->r.status = (uint32_t)st;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		out_addr(o)[i] = b[i].addr;
		o->r.bytes += b[i].size;
	}
	o->r.blocks = n;
	o->r.status = MT_REACH_DONE;
}

/* ---- the parent ---- */

/*
 * libmemtrace.so's segments (its data holds no program pointer worth a
 * root) and libc's writable one (the copy looks for the main arena there).
 */
static int find_objects(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct mt_reach_input *in = arg;
	uintptr_t here = (uintptr_t)&mt_reach_at_exit, lo = UINTPTR_MAX, hi = 0, wlo = 0, whi = 0;
	const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	bool mine = false;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
		if (ph->p_flags & PF_W) {
			wlo = a;
			whi = a + ph->p_memsz;
		}
		mine |= here >= a && here < a + ph->p_memsz;
	}
	if (mine) {
		in->self_lo = lo & ~(uintptr_t)4095;
		in->self_hi = page_up(hi);
	} else if (name && !strncmp(name, "/libc.so", 8)) {
		in->libc_lo = wlo;
		in->libc_hi = whi;
	}
	return 0;
}

/* Half of what the cgroup has left, or a quarter of the machine. */
static uint64_t copy_budget(void)
{
	uint64_t current, max;
	struct sysinfo si;

	mt_sampler_cgroup(&current, &max);
	if (max)
		return max > current ? (max - current) / 2 : 0;
	if (sysinfo(&si) == 0)
		return (uint64_t)si.totalram * si.mem_unit / 4;
	return 1ull << 30;
}

static __attribute__((noinline)) uintptr_t stack_pointer(void)
{
	return (uintptr_t)__builtin_frame_address(0);
}

static void write_reach(uint64_t time, unsigned status, uint64_t detail,
                        const struct mt_reach_result *r, uint64_t ns)
{
	uint8_t *rec = mt_room(4 + 9 * MT_MAX_VARINT), *q;

	if (!rec)
		return;
	q = mt_put_varint(rec + 4, time);
	q = mt_put_varint(q, status);
	q = mt_put_varint(q, detail);
	q = mt_put_varint(q, r ? r->blocks : 0);
	q = mt_put_varint(q, r ? r->bytes : 0);
	q = mt_put_varint(q, r ? r->scanned : 0);
	q = mt_put_varint(q, ns);
	q = mt_put_varint(q, r ? r->chunks : 0);
	mt_commit_large(rec, MT_REC_REACH, q);
}

/* The blocks of each class, in address order, PER_RECORD to a record. */
static void write_blocks(const uint64_t *addr, const uint8_t *cls, size_t n)
{
	for (uint8_t c = MT_REACH_DEFINITE; c <= MT_REACH_REACHABLE; c++) {
		size_t i = 0;
		while (i < n) {
			size_t k = 0, j = i;
			uint64_t prev = 0;
			uint8_t *rec, *q;
			while (j < n && k < PER_RECORD)
				k += cls[j++] == c;
			if (!k)
				break;
			rec = mt_room(4 + (2 + k) * MT_MAX_VARINT);
			if (!rec)
				return;
			q = mt_put_varint(rec + 4, c);
			q = mt_put_varint(q, k);
			for (; i < j; i++) {
				if (cls[i] != c)
					continue;
				q = mt_put_varint(q, mt_zigzag((int64_t)(addr[i] - prev)));
				prev = addr[i];
			}
			mt_commit_large(rec, MT_REC_REACH_BLOCKS, q);
		}
	}
}

/*
 * Waits for the copy; 0 when it finished, else MT_REACH_FAILED's detail
 * (SIGALRM once its time is up: MT_REACH_TIMEOUT).
 */
static uint64_t wait_copy(pid_t pid)
{
	int st;

	for (;;) {
		long r = syscall(SYS_wait4, pid, &st, __WALL, NULL);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return 256 + 255; /* reaped by the program's own wait: unknown */
	}
	if (WIFSIGNALED(st))
		return (uint64_t)WTERMSIG(st);
	return WEXITSTATUS(st) ? 256 + (uint64_t)WEXITSTATUS(st) : 0;
}

/*
 * Whether a scan that classified nothing is said on stderr: a fault is, and
 * a scan out of time (the user can give it more), a want of memory is not
 * (the report says why the leaks have no classes; a program that ends near
 * its memory limit is not told at every exit).
 */
static const char *worth_saying(unsigned status)
{
	switch (status) {
	case MT_REACH_FAILED:
		return "the scanning process failed";
	case MT_REACH_NO_TRACE:
		return "the trace could not be read back";
	case MT_REACH_TIMEOUT:
		return "the scan ran out of time";
	default:
		return NULL;
	}
}

/*
 * Whether orphans of the program's descendants become its children: it is a
 * child subreaper (PR_SET_CHILD_SUBREAPER: a process manager) or the first
 * process of its pid namespace (a container's). The copy's second process
 * would be one, should the copy die first (the OOM killer's first choice):
 * the program would get a SIGCHLD and a child it never made, killed by its
 * death signal. Such a program's copy reads on one core. Raw calls; the
 * caller keeps errno.
 */
static bool reaps_orphans(void)
{
	int flag = 0;

	return syscall(SYS_getpid) == 1 ||
	       (syscall(SYS_prctl, PR_GET_CHILD_SUBREAPER, &flag, 0, 0, 0) == 0 && flag);
}

void mt_reach_at_exit(void)
{
	struct mt_reach_input in = {0};
	struct out *o;
	size_t out_bytes;
	uint64_t began = mt_monotonic_ns(), detail = 0;
	unsigned status;
	int err = errno;
	long pid;

	if (!mt_config.reachability) {
		write_reach(mt_now(), MT_REACH_OFF, 0, NULL, 0);
		return;
	}
	o = out_map(&out_bytes);
	if (!o) {
		write_reach(mt_now(), MT_REACH_NO_MEMORY, OUT_MIN, NULL, 0);
		errno = err;
		return;
	}
	dl_iterate_phdr(find_objects, &in);
	in.brk = (uintptr_t)sbrk(0);
	mt_reach_budget = copy_budget();
	in.out_lo = (uintptr_t)o;
	in.out_hi = (uintptr_t)o + out_bytes;
	in.instance = mt_instance;
	in.one_core = reaps_orphans();
	in.trace_fd = mt_writer_trace_hold(&in.trace_ino);
	if (in.trace_fd < 0) {
		status = MT_REACH_NO_TRACE;
		detail = (uint64_t)-in.trace_fd;
		goto done;
	}
	/* the callers' registers onto the stack, which is scanned from here up,
	 * or from where the program's own frames end when that is known */
	__builtin_unwind_init();
	in.sp = mt_exit_sp ? mt_exit_sp : stack_pointer();
	in.cutoff = mt_now();
	if (!atomic_load(&chunks_lost)) {
		in.chunks = (uint64_t *const *)chunk_blocks;
		in.nchunks = atomic_load(&chunk_count);
	}
	pid = syscall(SYS_clone, 0, NULL, NULL, NULL, NULL);
	if (pid == 0) {
		copy_main(&in, o);
		mt_reach_reap(false);
		syscall(SYS_exit_group, 0);
	}
	mt_fd_release(MT_FD_TRACE);
	if (pid < 0) {
		status = MT_REACH_FAILED;
		detail = 256 + (uint64_t)errno;
		goto done;
	}
	detail = wait_copy((pid_t)pid);
	if (detail == SIGALRM && mt_config.reach_ms &&
	    mt_monotonic_ns() - began >= (uint64_t)mt_config.reach_ms * 1000000u) {
		status = MT_REACH_TIMEOUT;
		detail = mt_config.reach_ms;
	} else if (detail) {
		status = MT_REACH_FAILED;
	} else {
		status = o->r.status;
		detail = o->r.detail;
	}
done:
	write_reach(in.cutoff ? in.cutoff : mt_now(), status, detail,
	            status == MT_REACH_DONE ? &o->r : NULL, mt_monotonic_ns() - began);
	if (status == MT_REACH_DONE)
		write_blocks(out_addr(o), out_class(o), o->r.blocks);
	else if (status == MT_REACH_TIMEOUT)
		mt_say("leaks not classified: %s: %u ms (MEMTRACE_REACHABILITY_MS)",
		       worth_saying(status), mt_config.reach_ms);
	else if (worth_saying(status))
		mt_say("leaks not classified: %s", worth_saying(status));
	syscall(SYS_munmap, o, out_bytes);
	errno = err;
}
