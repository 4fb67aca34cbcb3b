/* SPDX-License-Identifier: MIT */
/*
 * The sampler thread: every MEMTRACE_INTERVAL_MS, the process's RSS, Pss and
 * Private_Dirty, glibc's heap figures (mallinfo2) and its cgroup's memory
 * use and limit (v2 memory.current/memory.max, or v1
 * memory.usage_in_bytes/memory.limit_in_bytes), as one SAMPLE record.
 *
 * smaps_rollup walks every mapping of the process, which costs milliseconds
 * in a large one; when it takes more than 5% of the interval it is read less
 * often, so the sampler never takes more than a few percent of a core.
 *
 * Context: sampler thread (guard always set, all signals blocked so that the
 * program's signal handling is not disturbed), and mt_sampler_last from
 * the exit paths.
 * May not: allocate with malloc (it reads /proc with open/read into static
 * buffers), print.
 */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt.h"

static _Atomic bool sampling; /* one sample at a time: buffers are static */
static uint64_t smaps_every = 1, smaps_tick;
static uint64_t last_pss, last_private_dirty;

static size_t slurp(const char *name, char *buf, size_t size)
{
	int f = open(name, O_RDONLY | O_CLOEXEC);
	ssize_t n = 0, r;

	if (f < 0)
		return 0;
	while ((size_t)n < size - 1 && (r = read(f, buf + n, size - 1 - (size_t)n)) > 0)
		n += r;
	close(f);
	buf[n] = 0;
	return (size_t)n;
}

static uint64_t field_kb(const char *text, const char *name)
{
	const char *p = strstr(text, name);

	return p ? strtoull(p + strlen(name), NULL, 10) * 1024 : 0;
}

static uint64_t number_file(const char *name)
{
	char buf[64];

	if (!slurp(name, buf, sizeof(buf)) || buf[0] < '0' || buf[0] > '9')
		return 0; /* "max" (v2, unlimited) or unreadable */
	return strtoull(buf, NULL, 10);
}

/* The cgroup memory figures of this process, looked up anew each time: a
 * process can be moved to another cgroup while it runs. */
static void cgroup_memory(uint64_t *current, uint64_t *max)
{
	static char text[4096];
	char file[4200];
	const char *v1 = NULL, *v2 = NULL;
	char *save = NULL;

	*current = *max = 0;
	if (!slurp("/proc/self/cgroup", text, sizeof(text)))
		return;
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
	if (v2) {
		snprintf(file, sizeof(file), "/sys/fs/cgroup%s/memory.current", v2);
		*current = number_file(file);
		if (*current) {
			snprintf(file, sizeof(file), "/sys/fs/cgroup%s/memory.max", v2);
			*max = number_file(file);
			return;
		}
	}
	if (v1) {
		snprintf(file, sizeof(file), "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", v1);
		*current = number_file(file);
		snprintf(file, sizeof(file), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", v1);
		*max = number_file(file);
		if (*max >= (uint64_t)1 << 62)
			*max = 0; /* v1 says "unlimited" with a huge number */
	}
}

/* fresh: read smaps_rollup whatever the throttle says (the last sample
 * before the end, whose figures a report reads as the process's last). */
static void take_sample(bool fresh)
{
	static char text[4096];
	uint64_t v[MT_SAMPLE_FIELD_COUNT];
	struct mallinfo2 mi;
	uint64_t now = mt_now(), began = mt_monotonic_ns();
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *rec, *q;

	if (atomic_exchange(&sampling, true))
		return;
	memset(v, 0, sizeof(v));
	if (slurp("/proc/self/statm", text, sizeof(text))) {
		unsigned long long size, rss;
		if (sscanf(text, "%llu %llu", &size, &rss) == 2)
			v[MT_SAMPLE_RSS] = rss * (uint64_t)page;
	}
	if (++smaps_tick >= smaps_every || fresh) {
		smaps_tick = 0;
		if (slurp("/proc/self/smaps_rollup", text, sizeof(text))) {
			last_pss = field_kb(text, "\nPss:");
			last_private_dirty = field_kb(text, "\nPrivate_Dirty:");
		}
		uint64_t took = mt_monotonic_ns() - began;
		uint64_t budget = (uint64_t)mt_config.interval_ms * 1000000u / 20;
		smaps_every = budget && took > budget ? took / budget + 1 : 1;
	}
	v[MT_SAMPLE_PSS] = last_pss;
	v[MT_SAMPLE_PRIVATE_DIRTY] = last_private_dirty;
	mi = mallinfo2();
	v[MT_SAMPLE_HEAP_ARENA] = mi.arena;
	v[MT_SAMPLE_HEAP_IN_USE] = mi.uordblks;
	v[MT_SAMPLE_HEAP_FREE] = mi.fordblks;
	v[MT_SAMPLE_HEAP_TRIMMABLE] = mi.keepcost;
	v[MT_SAMPLE_HEAP_MMAPPED] = mi.hblkhd;
	cgroup_memory(&v[MT_SAMPLE_CGROUP_CURRENT], &v[MT_SAMPLE_CGROUP_MAX]);
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

static void *sampler(void *arg)
{
	struct timespec period = {
	        .tv_sec = mt_config.interval_ms / 1000,
	        .tv_nsec = (long)(mt_config.interval_ms % 1000) * 1000000,
	};

	(void)arg;
	mt_self.guard = true;
	while (atomic_load_explicit(&mt_state, memory_order_relaxed) == MT_ON) {
		mt_sampler_sample();
		nanosleep(&period, NULL);
	}
	return NULL;
}

void mt_sampler_start(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t th;

	/* No sampler runs in this process yet (start-up, or a fork child, which
	 * has only the thread that forked). A child forked while its parent's
	 * sampler was mid-sample inherits sampling == true, and would never
	 * sample, not even at its exit; and it inherits the parent's last Pss
	 * and Private_Dirty, which its first sample must not repeat. */
	atomic_store(&sampling, false);
	smaps_every = 1;
	smaps_tick = 0;
	if (!mt_config.interval_ms)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	if (pthread_create(&th, &attr, sampler, NULL) == 0)
		pthread_setname_np(th, "memtrace");
	else
		mt_say("cannot start the sampler thread; RSS and heap figures will be missing");
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
