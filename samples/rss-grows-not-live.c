/* SPDX-License-Identifier: MIT */
/*
 * RSS that grows while live memory does not: glibc's dynamic mmap threshold.
 *
 * A block of 8 MiB is served by mmap and freed at start-up, which raises
 * glibc's mmap threshold to its size. From then on every step's temporary
 * of 2 MiB (a little larger each step, as a batch of growing inputs would
 * be) comes from the heap instead of mmap. Each step also keeps a 256-byte
 * record placed just above the temporary (it is asked for larger than any
 * free hole, then shrunk, as an object allocated after the temporary from
 * the top of the heap would be), so the freed temporary is a hole below a
 * live block: the heap cannot shrink, and the next, larger temporary does
 * not fit in it. Live memory grows 256 bytes a step; RSS grows 2 MiB.
 *
 * With MALLOC_MMAP_THRESHOLD_=131072 the threshold is fixed: temporaries are
 * mmapped and unmapped when freed, and RSS stays flat.
 *
 * rss-grows-not-live [STEPS]: STEPS steps (40 by default). Each prints
 * "step N rss BYTES", RSS from /proc/self/statm right after the step (the
 * truth the test fits), then holds still 30 ms so that memtrace's sampler
 * (every 10 ms) sees it before the step's MARK. Printing allocates nothing
 * (write(2) from a stack buffer), so the heap stays what the sampler saw.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STARTUP_BLOCK    (8 << 20)
#define TEMPORARY        (2 << 20)
#define TEMPORARY_GROWTH (4 << 10)
#define RECORD           256
#define MAX_STEPS        200

static char *records[MAX_STEPS];

/* Resident bytes now, from /proc/self/statm, read without malloc. */
static long long resident(void)
{
	char buf[128];
	long long size = 0, rss = -1;
	int f = open("/proc/self/statm", O_RDONLY);
	ssize_t n = f < 0 ? -1 : read(f, buf, sizeof(buf) - 1);

	if (f >= 0)
		close(f);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (sscanf(buf, "%lld %lld", &size, &rss) != 2)
		return -1;
	return rss * sysconf(_SC_PAGESIZE);
}

static void step(int i)
{
	size_t size = TEMPORARY + (size_t)i * TEMPORARY_GROWTH;
	char *tmp = malloc(size);
	char *rec;

	memset(tmp, i, size);
	/* from the top of the heap, above tmp: no hole is this large */
	rec = malloc(size + TEMPORARY);
	records[i] = realloc(rec, RECORD);
	memset(records[i], i, RECORD);
	free(tmp);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 40;
	int (*mark)(const char *);
	struct timespec hold = {0, 30 * 1000 * 1000};
	char line[96];
	char *startup;
	int n;

	if (steps < 3 || steps > MAX_STEPS)
		steps = 40;
	*(void **)&mark =
	        dlsym(RTLD_DEFAULT, "memtrace_mark"); /* POSIX's way to a function pointer */
	startup = malloc(STARTUP_BLOCK);
	memset(startup, 1, 4096);
	free(startup); /* an mmapped block freed: the threshold rises to 8 MiB */
	for (int i = 0; i < steps; i++) {
		step(i);
		n = snprintf(line, sizeof(line), "step %d rss %lld\n", i, resident());
		if (write(STDOUT_FILENO, line, (size_t)n) != n)
			return 1;
		nanosleep(&hold, NULL);
		if (mark) {
			snprintf(line, sizeof(line), "step %d", i);
			mark(line);
		}
	}
	return 0;
}
