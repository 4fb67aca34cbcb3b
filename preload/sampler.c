/* SPDX-License-Identifier: MIT */
/*
 * The sampler thread: every MEMTRACE_INTERVAL_MS, the process's RSS, Pss and
 * Private_Dirty, glibc's heap figures (mallinfo2) and its cgroup's memory
 * use and limit (v2 memory.current/memory.max, or v1
 * memory.usage_in_bytes/memory.limit_in_bytes), as one SAMPLE record.
 *
 * The thread shares the program's descriptor table, so it never opens and
 * closes files as it goes: a program that closes a number twice (harmless
 * untraced) would close the sampler's file, and the sampler would then read
 * or close whatever the program opened there next. Each file is opened once
 * into a slot of fds.c (a high number, checked by dev/ino) and read with
 * pread from offset 0, which procfs, sysfs and cgroupfs regenerate; it is
 * opened again only when the slot says the number is no longer ours, when
 * the process is another one (a fork child: /proc/self was the parent's), or
 * when the cgroup changed.
 *
 * smaps_rollup walks every page of the process, which costs milliseconds
 * in a large one; its reads take at most 1% of the sampler's time in CPU,
 * on average (5% in a process that forked or was forked: PSS_SHARE_*), so
 * the sampler never takes more than a few percent of a core. And it is read only when the
 * process's pages moved since the last read (statm's figures, its page faults), or that read is
 * older than PSS_MAX_AGE_NS: on a program that keeps both cores busy, the sampler's CPU is the
 * program's wall time, and smaps_rollup was most of it. A process that forked or was forked reads
 * it at every sample as before.
 *
 * mallinfo2 takes every arena's lock: from this thread every 10 ms it would
 * contend with each allocating thread and wait on a lock that a thread stuck
 * in a signal handler holds. So the figures are taken by a program thread
 * at the end of an interposed malloc, calloc or free, when it holds no
 * malloc lock, once the sampler has asked (mt_heap_ask); the sampler takes
 * them itself only when no thread has made such a call for a millisecond
 * after it asked (nothing contends then), so that an idle program's figures
 * are its last.
 *
 * Context: sampler thread (guard always set, all signals blocked so that the
 * program's signal handling is not disturbed), mt_sampler_last from the exit
 * paths and mt_sampler_heap from a program thread (hot path's slow side).
 * May not: allocate with malloc (static buffers), print, close a descriptor
 * that is not verified to be its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "mt.h"

static _Atomic bool sampling; /* one sample at a time: buffers are static */
static uint64_t last_pss, last_private_dirty;
static uint64_t last_pss_at; /* ticks: when smaps_rollup gave them */
/*
 * Pss and Private_Dirty move with the process's pages: a page mapped in,
 * dropped, or copied on write (a fault). statm's resident and shared counts
 * and getrusage's fault count show those for microseconds where
 * smaps_rollup walks every page. smaps_rollup is read again once the faults
 * and the change of those counts since its last read add up to more than
 * 1/2^PSS_MOVED_SHIFT of the resident pages (Pss can have moved by about
 * that much in between), or when the last read is PSS_MAX_AGE_NS old: Pss
 * also moves when another process maps or drops the same file pages, which
 * nothing here sees.
 */
#define PSS_MOVED_SHIFT 6
#define PSS_MAX_AGE_NS  (100 * 1000000u)
/*
 * The reads' share of the sampler's interval, as 1/N: a twentieth in a
 * process that forked or was forked, whose Pss moves with the other
 * processes' pages; a hundredth in one alone, whose Pss moves only with its
 * own: torch's 455 MB of RSS take 7.9 ms a read, and at a twentieth the
 * reads took 5% of a core, which a program busy on every core (torch's
 * threads) gives up in wall time.
 */
#define PSS_SHARE_FORKED 20
#define PSS_SHARE_ALONE  100
/*
 * The CPU time (ns) the reads may still take: each sample adds its share of
 * the interval, each read takes what it cost. A balance, not a judgement
 * of each read: a small process's reads cost 50-150 us against a share of
 * 100 us, and a rule by read (a read over the share skips the next sample)
 * read at 70 of 80 samples whose pages had moved, in a CI run under load,
 * and spent half the share. At most PSS_CREDIT_SAMPLES samples' worth is
 * kept, so a quiet spell buys no burst of dear reads.
 */
#define PSS_CREDIT_SAMPLES 4
static int64_t pss_credit;
static uint64_t pss_rss, pss_shared, pss_faults; /* pages, faults: at the last read */
static uint64_t pss_read_ns;                     /* monotonic: when */
/* A process that forked or was forked shares its pages with another
 * process, whose writes and exit move this one's Pss at every moment (a
 * worker pool's combined Pss came out 6% low with the parent's 100 ms old):
 * it reads smaps_rollup at every sample, as the throttle lets. */
static _Atomic bool pss_forked;
static bool began_once; /* a fork child inherits it set */
/* a fork shares pages anew, which makes every Pss of the tree stale: the
 * parent's is read again at its next sample whatever the throttle says */
static _Atomic bool pss_wanted;
/* physical memory, read once per process: a failed request is weighed against it */
static uint64_t mem_total;
static pid_t files_pid;           /* the process whose /proc/self the slots read */
static bool missing[MT_FD_SLOTS]; /* could not be opened: not tried again */
static char cg_key[4096];         /* the cgroup lines the cgroup files were chosen by */
static char cg_current[4200], cg_max[4200];
static bool cg_v1;

/*
 * The slot's file read from its start into buf, opened from path when the
 * slot has none. The slot's lock is held while the number is read, so no
 * dup2 of the program's can put another file under it meanwhile.
 */
/*
 * Opens the slot's file. open() returns the lowest free number, which for a
 * moment is among the program's: a program thread's double close of a stale
 * number could take it, and the program's next descriptor would get another
 * number than untraced. So the files are opened when the process begins
 * (mt_sampler_start: before main, or in a fork child, one thread either
 * way), and later only when the cgroup changed or the program took one.
 */
static int open_slot(enum mt_fd_slot slot, const char *path)
{
	struct stat want;
	int fd, r;

	if (missing[slot] || !path[0])
		return -1;
	/* the file's identity before its descriptor exists: what the number
	 * open returns must still be that file when it is moved (mt_fd_keep) */
	if (stat(path, &want) < 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		missing[slot] = true;
		return -1;
	}
	r = mt_fd_keep(slot, fd, &want);
	if (r == -ESTALE)
		return -1; /* the program took the number meanwhile: next time */
	if (r < 0)
		missing[slot] = true;
	return r < 0 ? -1 : 0;
}

static size_t read_slot(enum mt_fd_slot slot, const char *path, char *buf, size_t size)
{
	int fd = mt_fd_hold(slot);
	ssize_t r;
	size_t n = 0;

	if (fd < 0 && (open_slot(slot, path) < 0 || (fd = mt_fd_hold(slot)) < 0))
		return 0;
	while (n < size - 1 && (r = pread(fd, buf + n, size - 1 - n, (off_t)n)) > 0)
		n += (size_t)r;
	mt_fd_release(slot);
	buf[n] = 0;
	return n;
}

static uint64_t field_kb(const char *text, const char *name)
{
	const char *p = strstr(text, name);

	return p ? strtoull(p + strlen(name), NULL, 10) * 1024 : 0;
}

static uint64_t number_slot(enum mt_fd_slot slot, const char *path)
{
	char buf[64];

	if (!read_slot(slot, path, buf, sizeof(buf)) || buf[0] < '0' || buf[0] > '9')
		return 0; /* "max" (v2, unlimited) or unreadable */
	return strtoull(buf, NULL, 10);
}

/* A new cgroup (or the first): the files of its memory figures. */
static void cgroup_files(const char *v2, const char *v1)
{
	mt_fd_drop(MT_FD_CG_CURRENT);
	mt_fd_drop(MT_FD_CG_MAX);
	missing[MT_FD_CG_CURRENT] = missing[MT_FD_CG_MAX] = false;
	cg_current[0] = cg_max[0] = 0;
	cg_v1 = false;
	if (v2) {
		snprintf(cg_current, sizeof(cg_current), "/sys/fs/cgroup%s/memory.current", v2);
		snprintf(cg_max, sizeof(cg_max), "/sys/fs/cgroup%s/memory.max", v2);
		if (access(cg_current, R_OK) == 0 || !v1)
			return;
	}
	if (v1) {
		snprintf(cg_current, sizeof(cg_current),
		         "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", v1);
		snprintf(cg_max, sizeof(cg_max), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes",
		         v1);
		cg_v1 = true;
	}
}

/* The cgroup memory figures of this process. /proc/self/cgroup is read each
 * time: a process can be moved to another cgroup while it runs. */
static void cgroup_memory(uint64_t *current, uint64_t *max)
{
	static char text[4096], key[4096];
	const char *v1 = NULL, *v2 = NULL;
	char *save = NULL;

	*current = *max = 0;
	if (!read_slot(MT_FD_CGROUP, "/proc/self/cgroup", text, sizeof(text)))
		return;
	memcpy(key, text, sizeof(key));
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		if (!strcmp(line, "0") && c1[1] == 0)
			v2 = c2 + 1;
		else if (strstr(c1 + 1, "memory"))
			v1 = c2 + 1;
	}
	if (strcmp(key, cg_key)) {
		memcpy(cg_key, key, sizeof(cg_key));
		cgroup_files(v2, v1);
	}
	*current = number_slot(MT_FD_CG_CURRENT, cg_current);
	if (*current)
		*max = number_slot(MT_FD_CG_MAX, cg_max);
	if (cg_v1 && *max >= (uint64_t)1 << 62)
		*max = 0; /* v1 says "unlimited" with a huge number */
}

/* The files of /proc/self belong to the process that opened them: a fork
 * child (or a raw clone's) opens its own. */
static void files_for_this_process(void)
{
	if (files_pid == mt_pid)
		return;
	files_pid = mt_pid;
	for (int i = MT_FD_STATM; i <= MT_FD_CG_MAX; i++) { /* the sampler's slots only */
		mt_fd_drop((enum mt_fd_slot)i);
		missing[i] = false;
	}
	cg_key[0] = 0;
}

/*
 * Heap figures. mt_heap_ask's states: QUIET, an interposed call came after
 * the figures were taken (they may be stale); WANTED, the sampler asked for
 * new ones; FRESH, taken and no call since; TAKING, being taken. A sample
 * writes the latest figures; heap.seq is odd while they are written.
 */
_Atomic unsigned char mt_heap_ask;
static struct {
	_Atomic unsigned seq;
	uint64_t v[5];
	uint64_t took; /* CPU ns the last mallinfo2 took */
	uint64_t at;   /* when: the trace's ticks, after the taker's last event */
} heap;
static uint64_t heap_every = 1, heap_tick;

/* This thread's CPU time: what a mallinfo2 costs, not counting preemption. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Off the CPU for longer than this between the figures' time stamp and
 * mallinfo2's return (preempted, or waiting for an arena lock), the taker
 * let other calls change the heap after the moment it stamped: glibc's
 * figures were then of a later heap than the live bytes a report sets beside
 * them (24.5 MB freed in between in a CI run under load). Such figures are
 * taken again. mallinfo2 stays on the CPU for microseconds on a tidy heap,
 * but walks every free chunk: 10 ms on a churned one, where interrupts and
 * the hypervisor, whose time counts to no thread, took 1-2% of the walk (up
 * to 190 us) on this VM; HEAP_OFF_CPU_SHIFT allows 1/32 of it more, less
 * than a scheduler's slice.
 */
#define HEAP_OFF_CPU_NS    50000
#define HEAP_OFF_CPU_SHIFT 5
#define HEAP_TRIES         3

/* A program thread or the sampler pays at most this (ns) for the heap
 * figures an interval, on average: 1% of it. */
static uint64_t heap_budget(void)
{
	return (uint64_t)mt_config.interval_ms * 1000000u / 100;
}

/*
 * How the last take went (a program thread's or the sampler's), for the
 * sampler: a take that failed is tried again after 1, 2, 4, ... intervals,
 * up to the throttle's heap_every, not at every one (3 tries of a 10 ms walk
 * each, 45% of a core, while a churned heap's program waited on its exit's
 * scan); once one succeeds, at every interval again. A failure is most
 * often one preemption, and the next try soon after brings the figures of a
 * program gone idle up to date (it may exit a few intervals later).
 */
enum { HEAP_NONE, HEAP_TAKEN, HEAP_MISSED };
static _Atomic unsigned char heap_outcome;
static uint64_t heap_backoff, heap_wait; /* intervals; the sampler's own */

/* True when the figures were taken at the moment they are stamped with. */
static bool take_heap(void)
{
	int saved = errno;
	bool taken = false;

	for (int i = 0; i < HEAP_TRIES && !taken; i++) {
		uint64_t wall = mt_monotonic_ns(), began = cpu_ns(), at = mt_now();
		struct mallinfo2 mi = mallinfo2();
		uint64_t took = cpu_ns() - began, elapsed = mt_monotonic_ns() - wall;

		heap.took = took;
		if (elapsed > took + HEAP_OFF_CPU_NS + (took >> HEAP_OFF_CPU_SHIFT)) {
			if (took > heap_budget())
				break; /* dear: not again at once (heap_outcome's backoff) */
			continue;
		}
		atomic_fetch_add(&heap.seq, 1);
		heap.v[0] = mi.arena;
		heap.v[1] = mi.uordblks;
		heap.v[2] = mi.fordblks;
		heap.v[3] = mi.keepcost;
		heap.v[4] = mi.hblkhd;
		heap.at = at;
		atomic_fetch_add(&heap.seq, 1);
		taken = true;
	}
	errno = saved;
	return taken;
}

/* Figures not taken stay asked for: the next interval asks again. */
static void take_heap_now(void)
{
	bool taken = take_heap();

	atomic_store(&heap_outcome, taken ? HEAP_TAKEN : HEAP_MISSED);
	atomic_store(&mt_heap_ask, taken ? MT_HEAP_FRESH : MT_HEAP_QUIET);
}

void mt_sampler_heap(void)
{
	unsigned char s = atomic_load(&mt_heap_ask);

	if (s == MT_HEAP_PROBE)
		atomic_compare_exchange_strong(&mt_heap_ask, &s, MT_HEAP_QUIET); /* not idle */
	else if (s == MT_HEAP_FRESH)
		atomic_compare_exchange_strong(&mt_heap_ask, &s, MT_HEAP_QUIET);
	else if (s == MT_HEAP_WANTED &&
	         atomic_compare_exchange_strong(&mt_heap_ask, &s, MT_HEAP_TAKING)) {
		take_heap_now();
	}
}

/*
 * Sampler, before each sample: asks a program thread for new figures and
 * waits up to a millisecond for them; when no interposed call came in that
 * time, nothing contends for the arenas and it takes them itself.
 */
static void settle_heap(void)
{
	struct timespec step = {0, 100 * 1000};
	unsigned char s;

	switch (atomic_exchange(&heap_outcome, HEAP_NONE)) {
	case HEAP_TAKEN:
		heap_backoff = 0;
		break;
	case HEAP_MISSED:
		heap_backoff = heap_backoff ? heap_backoff * 2 : 1;
		if (heap_backoff > heap_every)
			heap_backoff = heap_every;
		heap_wait = heap_backoff;
		break;
	}
	if (heap_wait) {
		heap_wait--;
		return;
	}
	s = atomic_load(&mt_heap_ask);
	if (s == MT_HEAP_QUIET) {
		uint64_t budget = heap_budget();
		if (++heap_tick < heap_every) {
			/* the figures are dear: a program thread pays at most 1%. But a
			 * program that has gone idle (no interposed call within a
			 * millisecond of the probe) contends for nothing while they are
			 * taken, and would otherwise keep figures from before it went
			 * idle */
			if (!atomic_compare_exchange_strong(&mt_heap_ask, &s, MT_HEAP_PROBE))
				return;
			for (int i = 0; i < 10 && atomic_load(&mt_heap_ask) == MT_HEAP_PROBE; i++)
				nanosleep(&step, NULL);
			s = MT_HEAP_PROBE;
			if (atomic_compare_exchange_strong(&mt_heap_ask, &s, MT_HEAP_TAKING)) {
				take_heap_now();
			}
			return;
		}
		heap_tick = 0;
		heap_every = budget && heap.took > budget ? heap.took / budget + 1 : 1;
		atomic_compare_exchange_strong(&mt_heap_ask, &s, MT_HEAP_WANTED);
	}
	for (int i = 0; i < 10 && atomic_load(&mt_heap_ask) == MT_HEAP_WANTED; i++)
		nanosleep(&step, NULL);
	s = MT_HEAP_WANTED;
	if (atomic_compare_exchange_strong(&mt_heap_ask, &s, MT_HEAP_TAKING)) {
		take_heap_now();
	}
}

_Static_assert(MT_SAMPLE_HEAP_MMAPPED == MT_SAMPLE_HEAP_ARENA + 4,
               "the heap figures in heap.v's order");

/* The latest figures, and when they were taken. */
static void heap_figures(uint64_t *v, uint64_t *at)
{
	unsigned seq;

	for (int tries = 0; tries < 100; tries++) {
		seq = atomic_load(&heap.seq);
		if (seq & 1)
			continue;
		memcpy(v, heap.v, sizeof(heap.v));
		*at = heap.at;
		if (atomic_load(&heap.seq) == seq)
			return;
	}
}

/* The process's page faults so far, minor and major, all threads. */
static uint64_t faults(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
}

static uint64_t distance(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* Whether Pss may have moved since smaps_rollup was last read (pss_rss). */
static bool pages_moved(uint64_t rss, uint64_t shared, uint64_t flt, uint64_t now_ns)
{
	uint64_t moved =
	        distance(flt, pss_faults) + distance(rss, pss_rss) + distance(shared, pss_shared);

	return moved > rss >> PSS_MOVED_SHIFT || now_ns - pss_read_ns >= PSS_MAX_AGE_NS;
}

/* fresh: read smaps_rollup whatever the throttle says (the last sample
 * before the end, whose figures a report reads as the process's last). */
static void take_sample(bool fresh)
{
	static char text[4096];
	uint64_t v[MT_SAMPLE_FIELD_COUNT];
	uint64_t now, at = 0, began = mt_monotonic_ns();
	unsigned long long size, rss = 0, shared = 0;
	uint64_t flt = 0;
	long page = sysconf(_SC_PAGESIZE);
	bool moved = true; /* unknown without statm: read as often as the throttle lets */
	uint8_t *rec, *q;

	if (atomic_exchange(&sampling, true))
		return;
	memset(v, 0, sizeof(v));
	files_for_this_process();
	if (read_slot(MT_FD_STATM, "/proc/self/statm", text, sizeof(text))) {
		int got = sscanf(text, "%llu %llu %llu", &size, &rss, &shared);
		if (got >= 2)
			v[MT_SAMPLE_RSS] = rss * (uint64_t)page;
		if (got == 3) { /* file-backed and shared memory: the rest of RSS is anonymous */
			v[MT_SAMPLE_RSS_FILE] = shared * (uint64_t)page;
			flt = faults();
			moved = atomic_load(&pss_forked) || pages_moved(rss, shared, flt, began);
		}
	}
	int64_t share = (int64_t)mt_config.interval_ms * 1000000 /
	                (atomic_load(&pss_forked) ? PSS_SHARE_FORKED : PSS_SHARE_ALONE);
	pss_credit += share;
	if (pss_credit > share * PSS_CREDIT_SAMPLES)
		pss_credit = share * PSS_CREDIT_SAMPLES;
	if ((pss_credit > 0 && moved) || fresh || atomic_exchange(&pss_wanted, false)) {
		/* the read's cost in this thread's CPU time: wall time, on a machine whose cores
		 * are busy, counts the waits for a core too, and made Pss reads rarest when a
		 * forked tree was busiest (its combined Pss 24% low in a CI run under load) */
		uint64_t cpu = cpu_ns();
		if (read_slot(MT_FD_SMAPS, "/proc/self/smaps_rollup", text, sizeof(text))) {
			last_pss = field_kb(text, "\nPss:");
			last_private_dirty = field_kb(text, "\nPrivate_Dirty:");
			last_pss_at = mt_now();
			pss_read_ns = began;
			pss_rss = rss;
			pss_shared = shared;
			pss_faults = flt;
		}
		pss_credit -= (int64_t)(cpu_ns() - cpu);
	}
	v[MT_SAMPLE_PSS] = last_pss;
	v[MT_SAMPLE_PRIVATE_DIRTY] = last_private_dirty;
	if (fresh) {
		/* a program thread at its end: the last figures must be exact */
		if (atomic_exchange(&mt_heap_ask, MT_HEAP_TAKING) != MT_HEAP_TAKING) {
			take_heap_now();
		} /* else another thread is taking them this moment */
	}
	heap_figures(&v[MT_SAMPLE_HEAP_ARENA], &at);
	/* figures taken since this thread's last record: the sample is of their
	 * moment, so that the live bytes a report sets beside them are of the
	 * same instant (RSS, read microseconds apart, moves far more slowly) */
	now = at > mt_self.time ? at : mt_now();
	/* how old the heap figures are, so a report pairs them with the live
	 * bytes of their own moment, not of this one */
	v[MT_SAMPLE_HEAP_AGE] = at && now > at ? now - at : 0;
	/* the same for Pss, which the throttle may have kept: a sum over the
	 * tree must not take a figure from before a fork as one after it */
	v[MT_SAMPLE_PSS_AGE] = last_pss_at && now > last_pss_at ? now - last_pss_at : 0;
	cgroup_memory(&v[MT_SAMPLE_CGROUP_CURRENT], &v[MT_SAMPLE_CGROUP_MAX]);
	v[MT_SAMPLE_MEM_TOTAL] = mem_total;
	rec = mt_room(8 + (MT_SAMPLE_FIELD_COUNT + 3) * MT_MAX_VARINT);
	if (rec) {
		q = mt_put_time(rec + 2, now);
		q = mt_put_varint(q, began);
		q = mt_put_varint(q, MT_SAMPLE_FIELD_COUNT);
		for (int i = 0; i < MT_SAMPLE_FIELD_COUNT; i++)
			q = mt_put_varint(q, v[i]);
		mt_commit_small(rec, MT_REC_SAMPLE, q);
	}
	atomic_store(&sampling, false);
}

void mt_sampler_sample(void)
{
	take_sample(false);
}

void mt_sampler_last(void)
{
	take_sample(true);
}

void mt_sampler_cgroup(uint64_t *current, uint64_t *max)
{
	*current = *max = 0;
	/* its buffers are the sampler's: unknown while a sample is under way */
	if (atomic_exchange(&sampling, true))
		return;
	files_for_this_process();
	cgroup_memory(current, max);
	atomic_store(&sampling, false);
}

void mt_sampler_forked(void)
{
	atomic_store(&pss_forked, true);
	atomic_store(&pss_wanted, true);
}

static void *sampler(void *arg)
{
	struct timespec period = {
	        .tv_sec = mt_config.interval_ms / 1000,
	        .tv_nsec = (long)(mt_config.interval_ms % 1000) * 1000000,
	};

	(void)arg;
	mt_self.guard = true;
	/* named from inside: pthread_setname_np from another thread writes
	 * /proc/PID/task/TID/comm, whose dentries the kernel must then clear when
	 * the process is reaped (a millisecond per short process) */
	prctl(PR_SET_NAME, "memtrace", 0, 0, 0);
	while (atomic_load_explicit(&mt_state, memory_order_relaxed) == MT_ON) {
		settle_heap();
		take_sample(false);
		nanosleep(&period, NULL);
	}
	return NULL;
}

/*
 * A process begins (start-up, or a fork child, which has only the thread
 * that forked): its files are opened and its sampler thread started. The
 * thread runs from the start: a process that touches memory without
 * allocating (a worker writing its part of an inherited dataset) still
 * gets its figures over time.
 */
void mt_sampler_start(void)
{
	uint64_t cg_current_now, cg_max_now;
	struct sysinfo si;
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t th;

	/* A child forked while its parent's sampler was mid-sample inherits
	 * sampling == true, and would never sample, not even at its exit; and it
	 * inherits the parent's last Pss and Private_Dirty, which its first
	 * sample must not repeat (smaps_rollup is read then). */
	atomic_store(&sampling, false);
	pss_credit = 0;
	last_pss_at = 0;
	pss_read_ns = pss_rss = pss_shared = pss_faults = 0;
	atomic_store(&pss_forked, began_once);
	began_once = true;
	atomic_store(&pss_wanted, false);
	/* the same for the heap figures: a parent's thread may have been taking them */
	atomic_store(&mt_heap_ask, MT_HEAP_QUIET);
	if (atomic_load(&heap.seq) & 1)
		atomic_fetch_add(&heap.seq, 1);
	heap.at = 0; /* the parent's: before this process began */
	heap_every = 1;
	heap_tick = 0;
	atomic_store(&heap_outcome, HEAP_NONE);
	heap_backoff = heap_wait = 0;
	if (!mt_config.interval_ms)
		return;
	/* sysinfo's totalram is the kernel's totalram_pages, which /proc/meminfo's
	 * MemTotal prints in KiB: the same figure without parsing a file */
	mem_total = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0;
	/* the files now, while this process has one thread (open_slot) */
	files_for_this_process();
	open_slot(MT_FD_STATM, "/proc/self/statm");
	open_slot(MT_FD_SMAPS, "/proc/self/smaps_rollup");
	cgroup_memory(&cg_current_now, &cg_max_now);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	if (pthread_create(&th, &attr, sampler, NULL) != 0)
		mt_say("cannot start the sampler thread; RSS and heap figures will be missing");
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
