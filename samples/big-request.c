/* SPDX-License-Identifier: MIT */
/*
 * A large request that fails although the heap has more than enough free
 * in total: the process runs under an address-space limit (ulimit -v, as
 * batch schedulers set), its heap holds 80 MiB of 100 KiB records of which
 * every other one is dropped, and then it asks for 32 MiB in one piece.
 * The 40 MiB free are 400 holes of 100 KiB; none fits the request, and the
 * limit leaves no room for new address space, so malloc returns NULL.
 *
 * big-request: prints glibc's figures (mallinfo2's fordblks and arena)
 * just before the request, then "malloc(SIZE) failed" and exits 1. The
 * records are below glibc's mmap threshold (128 KiB), so they are in the
 * heap proper; output is written from stack buffers (no malloc).
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define RECORDS 800
#define RECORD_SIZE (100 << 10)
#define REQUEST (32 << 20)
#define HEADROOM (8 << 20)

static char *records[RECORDS];

static void say(const char *line)
{
	if (write(STDOUT_FILENO, line, strlen(line)) < 0)
		exit(2);
}

static void load_records(void)
{
	for (int i = 0; i < RECORDS; i++) {
		records[i] = malloc(RECORD_SIZE);
		memset(records[i], i, RECORD_SIZE);
	}
}

/* The address space in use now, from /proc/self/status (VmSize, in kB). */
static unsigned long long address_space(void)
{
	char buf[4096], *p;
	FILE *f = fopen("/proc/self/status", "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strstr(buf, "VmSize:");
	return p ? strtoull(p + 7, NULL, 10) * 1024 : 0;
}

static void *assemble_report(size_t size)
{
	return malloc(size);
}

int main(void)
{
	struct timespec hold = {0, 100 * 1000 * 1000};
	struct rlimit cap;
	struct mallinfo2 mi;
	char line[160];
	void *report;

	load_records();
	for (int i = 0; i < RECORDS; i += 2) {
		free(records[i]);
		records[i] = NULL;
	}
	/* the scheduler's limit: what is mapped now and a little more */
	cap.rlim_cur = cap.rlim_max = address_space() + HEADROOM;
	if (cap.rlim_cur == HEADROOM || setrlimit(RLIMIT_AS, &cap)) {
		say("cannot set the address-space limit\n");
		return 2;
	}
	nanosleep(&hold, NULL); /* memtrace's sampler sees the heap as it is */
	mi = mallinfo2();
	snprintf(line, sizeof(line), "arena %zu fordblks %zu request %d\n", mi.arena, mi.fordblks, REQUEST);
	say(line);
	report = assemble_report(REQUEST);
	if (!report) {
		snprintf(line, sizeof(line), "malloc(%d) failed\n", REQUEST);
		say(line);
		return 1;
	}
	say("the request fitted: no failure to show\n");
	free(report);
	return 0;
}
